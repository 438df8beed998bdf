import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { oauth1Header } from '@latchkey/oauth1';
import { startOAuth1Server, type TestOAuth1Server } from './oauth1-server.js';

const CONSUMER = { key: 'ck', secret: 'cs' };
const CALLBACK = 'http://127.0.0.1:9/oauth/callback';

let server: TestOAuth1Server;

beforeAll(async () => {
  server = await startOAuth1Server({ consumers: [CONSUMER] });
});

afterAll(async () => {
  await server?.close();
});

const form = async (response: Response) => Object.fromEntries(new URLSearchParams(await response.text()));

/** POST to an endpoint, signed as the signer under test signs. */
function signedPost(url: string, extra: { token?: string; tokenSecret?: string; consumerSecret?: string; protocolParams?: Record<`oauth_${string}`, string> } = {}) {
  const authorization = oauth1Header({
    method: 'POST',
    url,
    consumerKey: CONSUMER.key,
    consumerSecret: extra.consumerSecret ?? CONSUMER.secret,
    token: extra.token,
    tokenSecret: extra.tokenSecret,
    protocolParams: extra.protocolParams,
  });
  return fetch(url, { method: 'POST', headers: { authorization } });
}

describe('the loopback OAuth 1.0a provider', () => {
  it('runs the three legs and then answers signed calls for the tokens it issued', async () => {
    const temporary = await form(await signedPost(server.requestTokenUrl, { protocolParams: { oauth_callback: CALLBACK } }));
    expect(temporary).toMatchObject({ oauth_token: expect.any(String), oauth_token_secret: expect.any(String), oauth_callback_confirmed: 'true' });
    const consent = await fetch(`${server.authorizationUrl}?oauth_token=${encodeURIComponent(temporary['oauth_token']!)}`, { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(CALLBACK);
    const verifier = back.searchParams.get('oauth_verifier')!;
    const access = await form(
      await signedPost(server.accessTokenUrl, { token: temporary['oauth_token']!, tokenSecret: temporary['oauth_token_secret']!, protocolParams: { oauth_verifier: verifier } }),
    );
    expect(server.issuedAccessTokens()).toEqual([access['oauth_token']]);

    const url = `${server.url}/api/me?q=a+b`;
    const call = await fetch(url, {
      headers: { authorization: oauth1Header({ method: 'GET', url, consumerKey: CONSUMER.key, consumerSecret: CONSUMER.secret, token: access['oauth_token'], tokenSecret: access['oauth_token_secret'] }) },
    });
    expect(call.status).toBe(200);
    // The temporary token was spent by the exchange.
    const again = await signedPost(server.accessTokenUrl, { token: temporary['oauth_token']!, tokenSecret: temporary['oauth_token_secret']!, protocolParams: { oauth_verifier: verifier } });
    expect(again.status).toBe(401);
  });

  it('refuses a wrong consumer secret, a missing callback and a replayed nonce', async () => {
    expect((await form(await signedPost(server.requestTokenUrl, { consumerSecret: 'wrong', protocolParams: { oauth_callback: CALLBACK } })))['oauth_problem']).toBe('invalid signature');
    expect((await form(await signedPost(server.requestTokenUrl)))['oauth_problem']).toBe('oauth_callback is required');
    const authorization = oauth1Header({ method: 'POST', url: server.requestTokenUrl, consumerKey: CONSUMER.key, consumerSecret: CONSUMER.secret, protocolParams: { oauth_callback: CALLBACK } });
    expect((await fetch(server.requestTokenUrl, { method: 'POST', headers: { authorization } })).status).toBe(200);
    const replay = await fetch(server.requestTokenUrl, { method: 'POST', headers: { authorization } });
    expect(replay.status).toBe(401);
    expect((await form(replay))['oauth_problem']).toBe('missing or reused nonce');
  });
});
