import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Latchkey } from '@latchkey/client';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let oauth: TestOAuthServer;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  oauth = await startOAuthServer({ requirePkce: true });
  const providersFile = writeProvidersFile(
    `loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n  default_scopes: [read, write]\n`,
  );
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', credentials: { client_id: 'test-client', client_secret: 'test-secret' } });
  await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'not-allowed', credentials: { client_id: 'test-client', client_secret: 'test-secret' } });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await oauth?.close();
});

describe('the OAuth 2 connect flow', () => {
  it('goes from a session to the provider and back to a connection with the session tags and working tokens', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'oauth-user' }, allowed_integrations: ['oauth'] })).json.data;

    const start = await fetch(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`, { redirect: 'manual' });
    expect(start.status).toBe(302);
    const authorize = new URL(start.headers.get('location')!);
    expect(`${authorize.origin}${authorize.pathname}`).toBe(oauth.authorizationUrl);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${stack.url}/oauth/callback`);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('scope')).toBe('read write');
    expect(authorize.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const consent = await fetch(authorize, { redirect: 'manual' });
    const callback = consent.headers.get('location')!;
    const done = await fetch(callback);
    expect(done.status).toBe(200);
    const page = await done.text();
    expect(page).toContain('Connected');
    expect(page).toContain('"type":"connect"');

    const latchkey = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
    const found = await latchkey.waitForConnection('oauth', 'oauth-user', { intervalMs: 100, attempts: 20 });
    const connection = await latchkey.getConnection('oauth', found.connection_id);
    expect(connection.tags).toEqual({ end_user_id: 'oauth-user' });
    const accessToken = connection.credentials?.['access_token'] as string;
    expect((await fetch(`${oauth.url}/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } })).status).toBe(200);
    expect(Date.parse(connection.credentials?.['expires_at'] as string)).toBeGreaterThan(Date.now() + 3000_000);
    expect(oauth.stats.tokenRequestLog.at(-1)?.body['code_verifier']).toBeTruthy();

    // The state is single-use: the same redirect again is refused.
    const replay = await fetch(callback);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('already used');
  });

  it('refuses integrations the session does not allow and unknown states', async () => {
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['oauth'] })).json.data;
    const refused = await fetch(`${stack.url}/oauth/connect/not-allowed?connect_session_token=${token}`, { redirect: 'manual' });
    expect(refused.status).toBe(403);
    const unknown = await fetch(`${stack.url}/oauth/callback?code=x&state=unknown-state`);
    expect(unknown.status).toBe(400);
    // Anyone may open the callback with any text: it is shown only for a flow of ours.
    const forged = await fetch(`${stack.url}/oauth/callback?error=access_denied&error_description=Call+this+number`);
    expect(forged.status).toBe(400);
    const forgedPage = await forged.text();
    expect(forgedPage).toContain('The provider refused the connection.');
    expect(forgedPage).not.toContain('Call this number');
    const allowed = (await api('POST', '/connect/sessions', { allowed_integrations: ['oauth'] })).json.data.token;
    const start = await fetch(`${stack.url}/oauth/connect/oauth?connect_session_token=${allowed}`, { redirect: 'manual' });
    const state = new URL(start.headers.get('location')!).searchParams.get('state');
    const denied = await fetch(`${stack.url}/oauth/callback?error=access_denied&error_description=The+user+said+no&state=${state}`);
    expect(await denied.text()).toContain('The user said no');
  });

  it('replaces the tokens of the same connection on reconnect', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'again' }, allowed_integrations: ['oauth'] })).json.data;
    const run = async (sessionToken: string) => {
      const start = await fetch(`${stack.url}/oauth/connect/oauth?connect_session_token=${sessionToken}`, { redirect: 'manual' });
      const consent = await fetch(start.headers.get('location')!, { redirect: 'manual' });
      return fetch(consent.headers.get('location')!);
    };
    await run(token);
    const first = (await api('GET', '/connections?tags[end_user_id]=again')).json.connections[0];
    const before = (await api('GET', `/connections/${first.connection_id}?provider_config_key=oauth`)).json.credentials.access_token;
    const reconnect = (await api('POST', '/connect/sessions/reconnect', { connection_id: first.connection_id, integration_id: 'oauth' })).json.data;
    expect((await run(reconnect.token)).status).toBe(200);
    const after = (await api('GET', `/connections/${first.connection_id}?provider_config_key=oauth`)).json.credentials.access_token;
    expect(after).not.toBe(before);
    expect((await api('GET', '/connections?tags[end_user_id]=again')).json.connections).toHaveLength(1);
  });
});
