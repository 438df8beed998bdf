import type { TestOAuthServer } from '@latchkey/testing';

/**
 * Runs the real authorization-code flow against the loopback OAuth server (auto-consent) and
 * returns the tokens it issued, as a provider would to an end user's browser.
 */
export async function authorizationCodeTokens(oauth: TestOAuthServer): Promise<{ access_token: string; refresh_token: string }> {
  const redirectUri = 'http://127.0.0.1:9/callback';
  const authorize = await fetch(
    `${oauth.authorizationUrl}?response_type=code&client_id=test-client&redirect_uri=${encodeURIComponent(redirectUri)}&state=s`,
    { redirect: 'manual' },
  );
  const code = new URL(authorize.headers.get('location')!).searchParams.get('code')!;
  const token = await fetch(oauth.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: 'test-client', client_secret: 'test-secret' }),
  });
  return (await token.json()) as { access_token: string; refresh_token: string };
}
