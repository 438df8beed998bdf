import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { freePort, startOAuth1Server, startOAuthServer, type TestOAuth1Server, type TestOAuthServer } from '@latchkey/testing';
import { artifactPath, launchBrowser } from './support/browser.js';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

/**
 * The Connect UI's other flows, in Chromium against real providers on loopback: OAuth 1.0a
 * three-legged, OAuth 2 client credentials, API keys tried against the provider's verification
 * request, an end user's own OAuth client, and a reconnect through the page.
 */

let stack: Stack;
let oauth: TestOAuthServer;
let oauth1: TestOAuth1Server;
let browser: Browser;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
const connectionsTagged = async (user: string) => (await api('GET', `/connections?tags[end_user_id]=${user}`)).json.connections as Array<{ connection_id: string; provider_config_key: string }>;
const fullConnection = async (id: string, key: string, query = '') => (await api('GET', `/connections/${id}?provider_config_key=${key}${query}`)).json;

/** Waits until the page's alert says this (answers from the server take a moment). */
const alertSays = (page: Page, text: string) => page.getByRole('alert').filter({ hasText: text }).waitFor({ timeout: 10_000 });

async function openSession(body: Record<string, unknown>): Promise<Page> {
  const created = await api('POST', body['connection_id'] ? '/connect/sessions/reconnect' : '/connect/sessions', body);
  expect(created.status).toBe(201);
  const page = await browser.newPage();
  await page.goto(created.json.data.connect_link);
  return page;
}

beforeAll(async () => {
  [oauth, oauth1] = await Promise.all([startOAuthServer({ requirePkce: true }), startOAuth1Server({ consumers: [{ key: 'consumer-key', secret: 'consumer-secret' }] })]);
  oauth.addClient({ client_id: 'own-client', client_secret: 'own-secret' });
  const providersFile = writeProvidersFile(
    [
      `loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n`,
      `loopback-oauth1:\n  display_name: Loopback OAuth 1\n  categories: [test]\n  auth_mode: OAUTH1\n  request_url: ${oauth1.requestTokenUrl}\n  authorization_url: ${oauth1.authorizationUrl}\n  token_url: ${oauth1.accessTokenUrl}\n  proxy:\n    base_url: ${oauth1.url}/api\n`,
      `loopback-cc:\n  display_name: Loopback Machine API\n  categories: [test]\n  auth_mode: OAUTH2_CC\n  token_url: ${oauth.tokenUrl}\n  proxy:\n    base_url: ${oauth.url}\n`,
      `loopback-tenant:\n  display_name: Tenant API\n  categories: [test]\n  auth_mode: API_KEY\n  connection_configuration: [account_id]\n  proxy:\n    base_url: ${oauth.url}\n    headers:\n      Authorization: Bearer \${apiKey}\n      X-Account: \${connectionConfig.account_id}\n`,
      `loopback-verified:\n  display_name: Verified API\n  categories: [test]\n  auth_mode: API_KEY\n  proxy:\n    base_url: ${oauth.url}\n    headers:\n      Authorization: Bearer \${apiKey}\n  verification:\n    method: GET\n    endpoints: [/userinfo]\n`,
      // Self-hosted: the end user names the host the key is tried at.
      `hosted-verified:\n  display_name: Self-hosted API\n  categories: [test]\n  auth_mode: API_KEY\n  connection_configuration: [host]\n  connection_config:\n    host: { type: string, pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' }\n  proxy:\n    base_url: http://\${connectionConfig.host}\n    headers:\n      Authorization: Bearer \${apiKey}\n  verification:\n    method: GET\n    endpoints: [/userinfo]\n`,
    ].join(''),
  );
  [stack, browser] = await Promise.all([startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } }), launchBrowser()]);
  const client = { client_id: 'test-client', client_secret: 'test-secret' };
  await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', display_name: 'Loopback OAuth', credentials: client });
  await api('POST', '/integrations', { provider: 'loopback-oauth1', unique_key: 'oauth1', display_name: 'Loopback OAuth 1', credentials: { client_id: 'consumer-key', client_secret: 'consumer-secret' } });
  await api('POST', '/integrations', { provider: 'loopback-cc', unique_key: 'machine', display_name: 'Loopback Machine API' });
  await api('POST', '/integrations', { provider: 'loopback-verified', unique_key: 'verified', display_name: 'Verified API' });
  await api('POST', '/integrations', { provider: 'hosted-verified', unique_key: 'hosted', display_name: 'Self-hosted API' });
  await api('POST', '/integrations', { provider: 'loopback-tenant', unique_key: 'tenant', display_name: 'Tenant API' });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
  await Promise.all([oauth?.close(), oauth1?.close()]);
});

describe('OAuth 1.0a, three-legged', () => {
  it('connects through the page: request token, the provider, the access token; the proxy then signs with it', async () => {
    const page = await openSession({ tags: { end_user_id: 'o1-user' }, allowed_integrations: ['oauth1'] });
    await page.getByRole('button', { name: 'Continue to Loopback OAuth 1' }).click();
    await page.getByRole('heading', { name: 'Connected' }).waitFor();
    await page.screenshot({ path: artifactPath('flows-1-oauth1-connected') });
    await page.close();

    const [connection] = await connectionsTagged('o1-user');
    const full = await fullConnection(connection!.connection_id, 'oauth1');
    expect(full.credentials).toMatchObject({ type: 'OAUTH1', oauth_token: expect.stringMatching(/^at_/), oauth_token_secret: expect.stringMatching(/^ats_/) });
    expect(oauth1.issuedAccessTokens()).toContain(full.credentials.oauth_token);
    expect(oauth1.refusals).toEqual([]);

    const proxied = await fetch(`${stack.url}/proxy/me`, {
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': connection!.connection_id, 'provider-config-key': 'oauth1' },
    });
    expect(proxied.status).toBe(200);
    expect(((await proxied.json()) as { token: string }).token).toBe(full.credentials.oauth_token);
  });

  it('uses each temporary token once', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'o1-replay' }, allowed_integrations: ['oauth1'] })).json.data;
    const start = await fetch(`${stack.url}/oauth/connect/oauth1?connect_session_token=${token}`, { redirect: 'manual' });
    expect(start.status).toBe(302);
    const authorize = new URL(start.headers.get('location')!);
    expect(`${authorize.origin}${authorize.pathname}`).toBe(oauth1.authorizationUrl);
    const callback = (await fetch(authorize, { redirect: 'manual' })).headers.get('location')!;
    expect(new URL(callback).pathname).toBe('/oauth/callback');
    expect((await fetch(callback)).status).toBe(200);
    const replay = await fetch(callback);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('already used');
    expect(await connectionsTagged('o1-replay')).toHaveLength(1);
  });

  it('reports a verifier the provider refuses, and the temporary token is spent anyway', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'o1-forged' }, allowed_integrations: ['oauth1'] })).json.data;
    const start = await fetch(`${stack.url}/oauth/connect/oauth1?connect_session_token=${token}`, { redirect: 'manual' });
    const callback = new URL((await fetch(start.headers.get('location')!, { redirect: 'manual' })).headers.get('location')!);
    const genuine = callback.searchParams.get('oauth_verifier')!;
    callback.searchParams.set('oauth_verifier', 'forged-verifier');
    const forged = await fetch(callback);
    expect(forged.status).toBe(424);
    expect(await forged.text()).toContain('The provider refused the authorization of &quot;oauth1&quot;: wrong oauth_verifier');
    expect(oauth1.refusals.at(-1)).toEqual({ path: '/oauth/access_token', reason: 'wrong oauth_verifier' });
    callback.searchParams.set('oauth_verifier', genuine);
    expect((await fetch(callback)).status).toBe(400);
    expect(await connectionsTagged('o1-forged')).toHaveLength(0);
  });
});

describe('OAuth 2 client credentials in the page', () => {
  it('refuses a client the provider refuses, then stores the token a good client buys', async () => {
    const page = await openSession({ tags: { end_user_id: 'cc-user' }, allowed_integrations: ['machine'] });
    await page.getByLabel('Client ID').fill('test-client');
    await page.getByLabel('Client secret').fill('wrong-secret');
    await page.getByRole('button', { name: 'Connect' }).click();
    await alertSays(page, 'The provider refused these client credentials: invalid_client');
    await page.screenshot({ path: artifactPath('flows-2-cc-refused') });
    expect(await connectionsTagged('cc-user')).toHaveLength(0);

    await page.getByLabel('Client secret').fill('test-secret');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('heading', { name: 'Loopback Machine API is connected' }).waitFor();
    await page.close();
    const [connection] = await connectionsTagged('cc-user');
    const full = await fullConnection(connection!.connection_id, 'machine');
    expect(full.credentials).toMatchObject({ type: 'OAUTH2_CC', client_id: 'test-client', token: expect.any(String) });
    expect(oauth.stats.issuedAccessTokens()).toContain(full.credentials.token);
  });

  it('names the missing field over HTTP', async () => {
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['machine'] })).json.data;
    const missing = await http(`${stack.url}/auth/oauth2_cc/machine?connect_session_token=${token}`, { method: 'POST', body: { client_id: 'test-client' } });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: 'invalid_body', errors: [{ path: 'client_secret' }] });
  });
});

describe('verification requests', () => {
  it('tries an API key at the provider first: a refused key is not stored, a good one is', async () => {
    const page = await openSession({ tags: { end_user_id: 'verified-user' }, allowed_integrations: ['verified'] });
    await page.getByLabel('API key').fill('not-a-key-the-provider-knows');
    await page.getByRole('button', { name: 'Connect' }).click();
    await alertSays(page, 'The provider refused these credentials');
    await page.screenshot({ path: artifactPath('flows-3-key-refused') });
    expect(await connectionsTagged('verified-user')).toHaveLength(0);

    // A key the provider knows: a token it issued (client-credentials grant).
    const issued = await fetch(oauth.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'test-client', client_secret: 'test-secret' }),
    });
    const { access_token: goodKey } = (await issued.json()) as { access_token: string };
    await page.getByLabel('API key').fill(goodKey);
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('heading', { name: 'Verified API is connected' }).waitFor();
    await page.close();
    expect(await connectionsTagged('verified-user')).toHaveLength(1);
  });

  it('answers 400 connection_test_failed over HTTP, naming no secret', async () => {
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['verified'] })).json.data;
    const refused = await http(`${stack.url}/api-auth/api-key/verified?connect_session_token=${token}`, { method: 'POST', body: { apiKey: 'secret-wrong-key' } });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('connection_test_failed');
    expect(refused.json.error.payload).toEqual({ results: [{ endpoint: '/userinfo', status: 401 }] });
    expect(JSON.stringify(refused.json)).not.toContain('secret-wrong-key');
  });

  it('tells an end user the same of a host they named whether its address is refused, or it does not resolve or answer', async () => {
    // Were a refused address told apart, the end user could map our internal DNS: which names
    // exist, and which resolve to private ranges. The stack allows 127.0.0.1 only: the other
    // literals are refused before any socket, `.invalid` resolves nowhere, the free port refuses.
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'hosted-user' }, allowed_integrations: ['hosted'] })).json.data;
    const hosts = ['127.0.0.2:4701', '169.254.169.254:80', 'nowhere.invalid', 'sso.latchkey.invalid:8443', `127.0.0.1:${await freePort()}`];
    const told: Record<string, unknown> = {};
    for (const host of hosts) {
      const answer = await http(`${stack.url}/api-auth/api-key/hosted?connect_session_token=${token}`, { method: 'POST', body: { apiKey: 'a-key', connection_config: { host } } });
      told[host] = { status: answer.status, body: answer.json };
    }
    const first = told[hosts[0]!];
    expect(first).toEqual({
      status: 400,
      body: { error: { code: 'connection_test_failed', message: expect.any(String), payload: { results: [{ endpoint: '/userinfo', error: 'unreachable' }] } } },
    });
    expect(told).toEqual(Object.fromEntries(hosts.map((host) => [host, first])));
    expect(await connectionsTagged('hosted-user')).toHaveLength(0);
  });
});

describe("an end user's own OAuth client", () => {
  const defaults = { oauth: { connection_config: { oauth_client_id_override: '', oauth_client_secret_override: '' } } };

  it('is offered when the session asks for it, used for the code exchange and for later refreshes', async () => {
    const page = await openSession({ tags: { end_user_id: 'own-client-user' }, allowed_integrations: ['oauth'], integrations_config_defaults: defaults });
    await page.getByText('Use your own OAuth app (optional)').waitFor();
    await page.getByLabel('Your OAuth client ID').fill('own-client');
    await page.screenshot({ path: artifactPath('flows-4-own-client-half') });
    await page.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await alertSays(page, 'fill in both');
    await page.getByLabel('Your OAuth client secret').fill('own-secret');
    await page.screenshot({ path: artifactPath('flows-4-own-client') });
    const authorizations: URL[] = [];
    page.on('request', (request) => {
      if (request.url().startsWith(oauth.authorizationUrl)) authorizations.push(new URL(request.url()));
    });
    await page.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await page.getByRole('heading', { name: 'Connected' }).waitFor();
    await page.close();
    expect(authorizations.map((url) => url.searchParams.get('client_id'))).toEqual(['own-client']);
    // The secret went in a request body, never in a URL the browser visited.
    expect(authorizations.some((url) => url.toString().includes('own-secret'))).toBe(false);

    const exchange = oauth.stats.tokenRequestLog.at(-1)!;
    expect(exchange).toMatchObject({ grantType: 'authorization_code', clientId: 'own-client', status: 200 });
    const [connection] = await connectionsTagged('own-client-user');
    const full = await fullConnection(connection!.connection_id, 'oauth');
    // The markers are instructions for the page, not connection config; the secret is never in it.
    expect(full.connection_config).toEqual({});
    expect(JSON.stringify(full.connection_config)).not.toContain('own-secret');

    const refreshed = await fullConnection(connection!.connection_id, 'oauth', '&force_refresh=true');
    expect(refreshed.credentials.access_token).not.toBe(full.credentials.access_token);
    expect(oauth.stats.tokenRequestLog.at(-1)).toMatchObject({ grantType: 'refresh_token', clientId: 'own-client', status: 200 });
  });

  it("uses the integration's client when the fields stay empty, and is refused where the session does not offer it", async () => {
    const page = await openSession({ tags: { end_user_id: 'own-client-empty' }, allowed_integrations: ['oauth'], integrations_config_defaults: defaults });
    await page.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await page.getByRole('heading', { name: 'Connected' }).waitFor();
    await page.close();
    expect(oauth.stats.tokenRequestLog.at(-1)).toMatchObject({ grantType: 'authorization_code', clientId: 'test-client' });

    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['oauth'] })).json.data;
    const refused = await http(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`, {
      method: 'POST',
      body: { oauth_client_id_override: 'own-client', oauth_client_secret_override: 'own-secret' },
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error.errors[0].path).toBe('client_override');
  });

  it('uses a client the customer set in the defaults, hides its secret from the page and lets no end user replace it', async () => {
    const preset = { oauth: { connection_config: { oauth_client_id_override: 'own-client', oauth_client_secret_override: 'own-secret' } } };
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['oauth'], integrations_config_defaults: preset })).json.data;
    const view = await http(`${stack.url}/connect/session`, { token });
    expect(view.status).toBe(200);
    expect(JSON.stringify(view.json)).not.toContain('own-secret');
    expect(view.json.data.integrations[0].own_oauth_client).toBeUndefined();
    const start = await fetch(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`, { redirect: 'manual' });
    expect(new URL(start.headers.get('location')!).searchParams.get('client_id')).toBe('own-client');
    const replaced = await http(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`, {
      method: 'POST',
      body: { oauth_client_id_override: 'test-client', oauth_client_secret_override: 'test-secret' },
    });
    expect(replaced.status).toBe(400);
  });
});

describe('connection config the customer set', () => {
  it('is not asked of the end user: the page asks only for what the session leaves open, and the connection keeps the preset', async () => {
    const open = await openSession({ tags: { end_user_id: 'tenant-open' }, allowed_integrations: ['tenant'] });
    await open.getByLabel('API key').waitFor();
    expect(await open.getByLabel('account id').count()).toBe(1);
    await open.close();

    const page = await openSession({ tags: { end_user_id: 'tenant-preset' }, allowed_integrations: ['tenant'], integrations_config_defaults: { tenant: { connection_config: { account_id: 'acme' } } } });
    await page.getByLabel('API key').fill('tenant-key');
    expect(await page.getByLabel('account id').count()).toBe(0);
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('heading', { name: 'Tenant API is connected' }).waitFor();
    await page.close();
    const [connection] = await connectionsTagged('tenant-preset');
    expect((await fullConnection(connection!.connection_id, 'tenant')).connection_config).toMatchObject({ account_id: 'acme' });

    // A reconnect asks for none of it: the connection keeps its own, with the new key.
    const again = await openSession({ connection_id: connection!.connection_id, integration_id: 'tenant' });
    await again.getByRole('heading', { name: 'Reconnect Tenant API' }).waitFor();
    expect(await again.getByLabel('account id').count()).toBe(0);
    await again.getByLabel('API key').fill('tenant-key-2');
    await again.getByRole('button', { name: 'Connect' }).click();
    await again.getByRole('heading', { name: 'Tenant API is connected' }).waitFor();
    await again.close();
    const renewed = await fullConnection(connection!.connection_id, 'tenant');
    expect(renewed.connection_config).toMatchObject({ account_id: 'acme' });
    expect(renewed.credentials.apiKey).toBe('tenant-key-2');
  });
});

describe('reconnect through the page', () => {
  it('re-authorizes the same connection and replaces its tokens', async () => {
    const first = await openSession({ tags: { end_user_id: 'reconnect-user' }, allowed_integrations: ['oauth'] });
    await first.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await first.getByRole('heading', { name: 'Connected' }).waitFor();
    await first.close();
    const [connection] = await connectionsTagged('reconnect-user');
    const before = (await fullConnection(connection!.connection_id, 'oauth')).credentials;

    const page = await openSession({ connection_id: connection!.connection_id, integration_id: 'oauth' });
    await page.getByRole('heading', { name: 'Reconnect Loopback OAuth' }).waitFor();
    await page.screenshot({ path: artifactPath('flows-5-reconnect') });
    await page.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await page.getByRole('heading', { name: 'Connected' }).waitFor();
    await page.close();

    const after = await connectionsTagged('reconnect-user');
    expect(after.map((item) => item.connection_id)).toEqual([connection!.connection_id]);
    const credentials = (await fullConnection(connection!.connection_id, 'oauth')).credentials;
    expect(credentials.access_token).not.toBe(before.access_token);
    expect(oauth.stats.issuedAccessTokens()).toContain(credentials.access_token);
  });
});

describe('PKCE at the authorization server', () => {
  it('refuses a code exchange whose verifier does not match, and the callback page says so', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'pkce-user' }, allowed_integrations: ['oauth'] })).json.data;
    const start = await fetch(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`, { redirect: 'manual' });
    // The challenge reaching the server is not the one the vault's verifier answers.
    const authorize = new URL(start.headers.get('location')!);
    authorize.searchParams.set('code_challenge', createHash('sha256').update('a-verifier-the-vault-never-had-0123456789abcdef').digest('base64url'));
    const callback = (await fetch(authorize, { redirect: 'manual' })).headers.get('location')!;
    const page = await browser.newPage();
    const answer = await page.goto(callback);
    expect(answer?.status()).toBe(424);
    await page.getByRole('heading', { name: 'Connection failed' }).waitFor();
    await expect(page.textContent('main')).resolves.toContain('The provider refused the authorization: invalid_grant (code_verifier does not match the code_challenge)');
    await page.screenshot({ path: artifactPath('flows-6-pkce-refused') });
    await page.close();
    expect(oauth.stats.tokenRequestLog.at(-1)).toMatchObject({ grantType: 'authorization_code', status: 400 });
    expect(await connectionsTagged('pkce-user')).toHaveLength(0);
  });
});
