import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { authorizationCodeTokens } from './support/oauth.js';
import { writeProvidersFile } from './support/providers.js';
import { createScopedKey, http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let oauth: TestOAuthServer;
let readKey: string;
let plainKey: string;

const api = (method: string, path: string, body?: unknown, token = stack.bootstrapKey) =>
  http(`${stack.url}${path}`, { method, token, ...(body === undefined ? {} : { body }) });

const newKey = (scopes: string[]) => createScopedKey(stack, scopes);

beforeAll(async () => {
  oauth = await startOAuthServer();
  const providersFile = writeProvidersFile(
    [
      'loopback-oauth:',
      '  display_name: Loopback OAuth',
      '  categories: [test]',
      '  auth_mode: OAUTH2',
      `  authorization_url: ${oauth.authorizationUrl}`,
      `  token_url: ${oauth.tokenUrl}`,
      '  proxy:',
      `    base_url: ${oauth.url}/api`,
      'loopback-cc:',
      '  display_name: Loopback client credentials',
      '  categories: [test]',
      '  auth_mode: OAUTH2_CC',
      `  token_url: ${oauth.tokenUrl}`,
      'loopback-key:',
      '  display_name: Loopback API key',
      '  categories: [test]',
      '  auth_mode: API_KEY',
      '',
    ].join('\n'),
  );
  stack = await startStack({
    env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    // 1,000 concurrent credential reads, each audited in FerretDB before it answers, can take
    // longer than the default 5 s deadline while other test files load a two-core machine; what
    // that test checks is one token request, not latency (make bench measures the read).
    serviceEnv: { gateway: { REQUEST_TIMEOUT_MS: '20000' } },
  });
  readKey = await newKey(['environment:connections:read_credentials', 'environment:connections:list']);
  plainKey = await newKey(['environment:connections:read', 'environment:integrations:read']);
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await oauth?.close();
});

describe('provider catalog', () => {
  it('lists hundreds of providers, searches them and serves one', async () => {
    const all = await api('GET', '/providers');
    expect(all.status).toBe(200);
    expect(all.json.data.length).toBeGreaterThanOrEqual(250);
    const searched = await api('GET', '/providers?search=loopback');
    expect(searched.json.data.map((provider: { name: string }) => provider.name).sort()).toEqual(['loopback-cc', 'loopback-key', 'loopback-oauth']);
    const one = await api('GET', '/providers/loopback-oauth');
    expect(one.json.data).toMatchObject({ name: 'loopback-oauth', auth_mode: 'OAUTH2', token_url: oauth.tokenUrl });
    expect((await api('GET', '/providers/no-such-provider')).json.error.code).toBe('unknown_provider');
  });
});

describe('integrations', () => {
  it('are created, listed, read with webhook data, updated and refused when duplicated', async () => {
    const created = await api('POST', '/integrations', {
      provider: 'loopback-oauth',
      unique_key: 'oauth',
      display_name: 'OAuth',
      credentials: { client_id: 'test-client', client_secret: 'test-secret' },
    });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ unique_key: 'oauth', provider: 'loopback-oauth' });
    expect((await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth' })).json.error.code).toBe('duplicate_provider_config');
    expect((await api('POST', '/integrations', { provider: 'nope', unique_key: 'x' })).status).toBe(400);

    const list = await api('GET', '/integrations');
    expect(list.json.data.map((item: { unique_key: string }) => item.unique_key)).toContain('oauth');

    const withWebhook = await api('GET', '/integrations/oauth?include=webhook');
    expect(withWebhook.json.data.webhook_url).toMatch(new RegExp(`/webhook/[0-9a-f-]{36}/oauth$`));
    expect(withWebhook.json.data.webhookSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(withWebhook.json.data.credentials).toBeUndefined();

    const withCredentials = await api('GET', '/integrations/oauth?include=credentials');
    expect(withCredentials.json.data.credentials).toEqual({ client_id: 'test-client', client_secret: 'test-secret' });
    const refused = await api('GET', '/integrations/oauth?include=credentials', undefined, plainKey);
    expect(refused.status).toBe(403);

    const updated = await api('PATCH', '/integrations/oauth', { display_name: 'OAuth 2' });
    expect(updated.status).toBe(200);
    expect((await api('GET', '/integrations/oauth')).json.data.display_name).toBe('OAuth 2');
    expect((await api('GET', '/integrations/oauth?include=credentials')).json.data.credentials.client_secret).toBe('test-secret');
    expect((await api('GET', '/integrations/missing')).json.error.code).toBe('unknown_provider_config');
  });
});

describe('connections', () => {
  beforeAll(async () => {
    await api('POST', '/integrations', { provider: 'loopback-key', unique_key: 'keys' });
    await api('POST', '/integrations', { provider: 'loopback-cc', unique_key: 'cc' });
  });

  it('import credentials, validated against their type', async () => {
    const bad = await api('POST', '/connections', { provider_config_key: 'keys', connection_id: 'k1', credentials: { type: 'API_KEY' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_body');
    expect(bad.json.error.errors.map((item: { path: string }) => item.path)).toContain('credentials.apiKey');

    const wrongType = await api('POST', '/connections', { provider_config_key: 'keys', credentials: { type: 'BASIC', username: 'u', password: 'p' } });
    expect(wrongType.json.error.errors[0].path).toBe('credentials.type');

    const created = await api('POST', '/connections', {
      provider_config_key: 'keys',
      connection_id: 'k1',
      credentials: { type: 'API_KEY', apiKey: 'sk_live_imported_key_1234567890' },
      tags: { End_User_Id: 'u-1', organization_id: 'org-1' },
      metadata: { plan: 'pro' },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ connection_id: 'k1', provider_config_key: 'keys', tags: { end_user_id: 'u-1' }, metadata: { plan: 'pro' } });
    expect(typeof created.json.id).toBe('number');
  });

  it('are read with credentials only under a credentials scope', async () => {
    const full = await api('GET', '/connections/k1?provider_config_key=keys', undefined, readKey);
    expect(full.status).toBe(200);
    expect(full.json.credentials).toEqual({ type: 'API_KEY', apiKey: 'sk_live_imported_key_1234567890' });
    for (const field of ['id', 'connection_id', 'provider_config_key', 'provider', 'errors', 'metadata', 'connection_config', 'tags', 'created_at', 'updated_at', 'last_fetched_at']) {
      expect(full.json).toHaveProperty(field);
    }
    const plain = await api('GET', '/connections/k1?provider_config_key=keys', undefined, plainKey);
    expect(plain.status).toBe(200);
    expect(plain.json.credentials).toBeUndefined();
    // Either read scope may refresh (the API document); the plain one still sees no credentials.
    const forced = await api('GET', '/connections/k1?provider_config_key=keys&force_refresh=true&refresh_token=true', undefined, plainKey);
    expect(forced.status).toBe(200);
    expect(forced.json.credentials).toBeUndefined();
    // A query parameter of another service's clients is ignored on a read route.
    const foreign = await api('GET', '/connections/k1?provider_config_key=keys&refresh_github_app_jwt_token=true', undefined, plainKey);
    expect(foreign.status).toBe(200);
    expect((await api('GET', '/connections/nope?provider_config_key=keys')).json.error.code).toBe('unknown_connection');
    expect((await api('GET', '/connections/k1')).json.error.code).toBe('invalid_query_params');
  });

  it('keep the legacy bodies on the deprecated route', async () => {
    const missing = await api('GET', '/connection/nope?provider_config_key=keys');
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ message: expect.any(String) });
    const invalid = await api('GET', '/connection/k1');
    expect(invalid.status).toBe(400);
    expect(invalid.json).toEqual({ message: expect.any(String) });
    expect((await api('GET', '/connection/k1?provider_config_key=keys')).json.credentials.apiKey).toBe('sk_live_imported_key_1234567890');
  });

  it('are listed with filters and never with credentials', async () => {
    await api('POST', '/connections', { provider_config_key: 'keys', connection_id: 'k2', credentials: { type: 'API_KEY', apiKey: 'sk_second_key_abcdefghijkl' }, tags: { end_user_id: 'u-2' } });
    const all = await api('GET', '/connections');
    expect(all.json.connections.length).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(all.json)).not.toContain('sk_');
    expect((await api('GET', '/connections?tags[end_user_id]=u-2')).json.connections.map((item: { connection_id: string }) => item.connection_id)).toEqual(['k2']);
    expect((await api('GET', '/connections?connectionId=k1')).json.connections).toHaveLength(1);
    expect((await api('GET', '/connections?integrationId=cc')).json.connections).toHaveLength(0);
    expect((await api('GET', '/connections?limit=1')).json.connections).toHaveLength(1);
    // Unknown query parameters are ignored on read routes.
    expect((await api('GET', '/connections?bogus=1')).status).toBe(200);
  });

  it('take tags and metadata (set replaces, update merges, for one id or many)', async () => {
    expect((await api('PATCH', '/connections/k1?provider_config_key=keys', { tags: { Team: 'a' } })).json).toEqual({ success: true });
    const tooMany = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v']));
    expect((await api('PATCH', '/connections/k1?provider_config_key=keys', { tags: tooMany })).status).toBe(400);

    const set = await api('POST', '/connections/metadata', { connection_id: ['k1', 'k2'], provider_config_key: 'keys', metadata: { a: 1 } });
    expect(set.status).toBe(201);
    expect(set.json).toEqual({ connection_id: ['k1', 'k2'], provider_config_key: 'keys', metadata: { a: 1 } });
    await api('PATCH', '/connections/metadata', { connection_id: 'k1', provider_config_key: 'keys', metadata: { b: 2 } });
    const k1 = await api('GET', '/connections/k1?provider_config_key=keys');
    expect(k1.json.metadata).toEqual({ a: 1, b: 2 });
    expect(k1.json.tags).toEqual({ team: 'a' });
    const missing = await api('POST', '/connections/metadata', { connection_id: ['k1', 'zz'], provider_config_key: 'keys', metadata: { c: 3 } });
    expect(missing.json.error.code).toBe('unknown_connection');
    expect((await api('GET', '/connections/k1?provider_config_key=keys')).json.metadata).toEqual({ a: 1, b: 2 });
  });

  it('are deleted', async () => {
    expect((await api('DELETE', '/connections/k2?provider_config_key=keys')).json).toEqual({ success: true });
    expect((await api('GET', '/connections/k2?provider_config_key=keys')).status).toBe(404);
  });
});

describe('refresh on fetch against a real OAuth 2 server', () => {
  async function importExpiring(connectionId: string, inMs: number) {
    const tokens = await authorizationCodeTokens(oauth);
    const created = await api('POST', '/connections', {
      provider_config_key: 'oauth',
      connection_id: connectionId,
      credentials: { type: 'OAUTH2', access_token: tokens.access_token, refresh_token: tokens.refresh_token, expires_at: new Date(Date.now() + inMs).toISOString(), raw: {} },
    });
    expect(created.status).toBe(201);
    return tokens;
  }

  it('leaves a token that is not close to expiry alone', async () => {
    const tokens = await importExpiring('fresh', 3600_000);
    oauth.stats.reset();
    const read = await api('GET', '/connections/fresh?provider_config_key=oauth', undefined, readKey);
    expect(read.json.credentials.access_token).toBe(tokens.access_token);
    expect(read.json.credentials.refresh_token).toBeUndefined();
    expect(oauth.stats.tokenRequests).toBe(0);
  });

  it('refreshes inside the window, rotating the refresh token, and shows it only when asked', async () => {
    const tokens = await importExpiring('rotating', 60_000);
    oauth.stats.reset();
    const read = await api('GET', '/connections/rotating?provider_config_key=oauth&refresh_token=true', undefined, readKey);
    expect(read.status).toBe(200);
    expect(read.json.credentials.access_token).not.toBe(tokens.access_token);
    expect(read.json.credentials.refresh_token).not.toBe(tokens.refresh_token);
    expect(Date.parse(read.json.credentials.expires_at)).toBeGreaterThan(Date.now() + 3000_000);
    expect(oauth.stats.grants.refresh_token).toBe(1);
    const works = await fetch(`${oauth.url}/userinfo`, { headers: { authorization: `Bearer ${read.json.credentials.access_token}` } });
    expect(works.status).toBe(200);

    const forced = await api('GET', '/connections/rotating?provider_config_key=oauth&force_refresh=true', undefined, readKey);
    expect(forced.json.credentials.access_token).not.toBe(read.json.credentials.access_token);
    expect(oauth.stats.grants.refresh_token).toBe(2);
    // Not asked for: the refresh token is in no part of the answer, the provider's own token
    // answer (`raw`) included, which names it too.
    const rotated = (await api('GET', '/connections/rotating?provider_config_key=oauth&refresh_token=true', undefined, readKey)).json.credentials.refresh_token;
    expect(typeof rotated).toBe('string');
    expect(JSON.stringify(forced.json)).not.toContain(rotated);
    expect(forced.json.credentials.raw).toMatchObject({ access_token: forced.json.credentials.access_token });
    expect(forced.json.credentials.raw).not.toHaveProperty('refresh_token');
  });

  it('refreshes on force_refresh with the plain read scope, and answers without credentials or refresh token', async () => {
    await importExpiring('plain-forced', 3600_000);
    oauth.stats.reset();
    const forced = await api('GET', '/connections/plain-forced?provider_config_key=oauth&force_refresh=true&refresh_token=true', undefined, plainKey);
    expect(forced.status).toBe(200);
    expect(forced.json.credentials).toBeUndefined();
    expect(JSON.stringify(forced.json)).not.toMatch(/refresh_token|access_token/);
    expect(oauth.stats.grants.refresh_token).toBe(1);
    const fresh = await api('GET', '/connections/plain-forced?provider_config_key=oauth', undefined, readKey);
  });

  it('makes exactly one token request for 1,000 concurrent fetches', async () => {
    await importExpiring('crowd', 60_000);
    oauth.stats.reset();
    oauth.setOptions({ tokenDelayMs: 200 });
    try {
      const reads = await Promise.all(
        Array.from({ length: 1000 }, () => api('GET', '/connections/crowd?provider_config_key=oauth', undefined, readKey)),
      );
      expect(reads.filter((read) => read.status !== 200).map((read) => read.json)).toEqual([]);
      const tokens = new Set(reads.map((read) => read.json.credentials.access_token));
      expect(tokens.size).toBe(1);
      expect(oauth.stats.tokenRequests).toBe(1);
      expect(oauth.stats.issuedAccessTokens()).toContain([...tokens][0]);
    } finally {
      oauth.setOptions({ tokenDelayMs: 0 });
    }
  }, 60_000);

  it('answers 424 with the provider error, records an auth error, then backs off', async () => {
    await importExpiring('revoked', 60_000);
    oauth.revokeRefreshTokens();
    const failed = await api('GET', '/connections/revoked?provider_config_key=oauth', undefined, readKey);
    expect(failed.status).toBe(424);
    expect(failed.json.error.code).toBe('refresh_token_external_error');
    expect(failed.json.error.payload).toMatchObject({ error: 'invalid_grant' });
    const again = await api('GET', '/connections/revoked?provider_config_key=oauth', undefined, readKey);
    expect(again.status).toBe(424);
    expect(again.json.error.code).toBe('connection_refresh_backoff');
    const item = (await api('GET', '/connections?connectionId=revoked')).json.connections[0];
    expect(item.errors).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
  });

  // A refresh ahead of expiry that met the token endpoint down for a moment was taken for a
  // refusal: 424, an auth error and an auth webhook asking for a reconnect, though the token in
  // hand worked for minutes more.
  it('hands out the token in hand, with no auth error, when the token endpoint fails for now (503) near its expiry; an expired one answers 424', async () => {
    const tokens = await importExpiring('provider-down', 5 * 60_000);
    await importExpiring('provider-down-expired', -60_000);
    const cc = await api('POST', '/connections', {
      provider_config_key: 'cc',
      connection_id: 'machine-provider-down',
      credentials: { type: 'OAUTH2_CC', client_id: 'test-client', client_secret: 'test-secret', token: 'cc-token-in-hand', expires_at: new Date(Date.now() + 5 * 60_000).toISOString(), raw: {} },
    });
    expect(cc.status).toBe(201);
    oauth.stats.reset();

    oauth.failNextToken(503, { error: 'temporarily_unavailable' });
    const read = await api('GET', '/connections/provider-down?provider_config_key=oauth', undefined, readKey);
    expect(read.status).toBe(200);
    expect(read.json.credentials.access_token).toBe(tokens.access_token);
    expect(read.json.errors).toEqual([]);
    // The vault waits a moment before asking the provider again.
    const again = await api('GET', '/connections/provider-down?provider_config_key=oauth', undefined, readKey);
    expect(again.json.credentials.access_token).toBe(tokens.access_token);
    expect(oauth.stats.tokenRequests).toBe(1);

    oauth.failNextToken(503, { error: 'temporarily_unavailable' });
    const machine = await api('GET', '/connections/machine-provider-down?provider_config_key=cc', undefined, readKey);
    expect(machine.status).toBe(200);
    expect(machine.json.credentials.token).toBe('cc-token-in-hand');
    expect(machine.json.errors).toEqual([]);

    oauth.failNextToken(503, { error: 'temporarily_unavailable' });
    const expired = await api('GET', '/connections/provider-down-expired?provider_config_key=oauth', undefined, readKey);
    expect(expired.status).toBe(424);
    expect(expired.json.error).toMatchObject({ code: 'refresh_token_external_error', payload: { status: 503 } });
    const errorsOf = async (connectionId: string) => (await api('GET', `/connections?connectionId=${connectionId}`)).json.connections[0].errors;
    expect(await errorsOf('provider-down')).toEqual([]);
    expect(await errorsOf('provider-down-expired')).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
  });

  it('gets client-credentials tokens', async () => {
    const created = await api('POST', '/connections', {
      provider_config_key: 'cc',
      connection_id: 'machine',
      credentials: { type: 'OAUTH2_CC', client_id: 'test-client', client_secret: 'test-secret', token: 'old-cc-token-value', expires_at: new Date(Date.now() + 1000).toISOString(), raw: {} },
    });
    expect(created.status).toBe(201);
    const read = await api('GET', '/connections/machine?provider_config_key=cc', undefined, readKey);
    expect(read.json.credentials.token).not.toBe('old-cc-token-value');
  });

  it('keeps a client-credentials token whose provider states no lifetime, until the provider refuses it', async () => {
    oauth.setOptions({ extraTokenFields: { expires_in: undefined } });
    try {
      const created = await api('POST', '/connections', {
        provider_config_key: 'cc',
        connection_id: 'machine-without-lifetime',
        credentials: { type: 'OAUTH2_CC', client_id: 'test-client', client_secret: 'test-secret', token: 'expired-cc-token', expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} },
      });
      expect(created.status).toBe(201);
      oauth.stats.reset();
      const first = await api('GET', '/connections/machine-without-lifetime?provider_config_key=cc', undefined, readKey);
      expect(first.json.credentials.token).not.toBe('expired-cc-token');
      expect(first.json.credentials.expires_at ?? null).toBeNull();
      const second = await api('GET', '/connections/machine-without-lifetime?provider_config_key=cc', undefined, readKey);
      expect(second.json.credentials.token).toBe(first.json.credentials.token);
      expect(oauth.stats.grants.client_credentials).toBe(1);
      // Refused by the provider (the proxy after a 401), it is renewed.
      const forced = await api('GET', '/connections/machine-without-lifetime?provider_config_key=cc&force_refresh=true', undefined, readKey);
      expect(forced.json.credentials.token).not.toBe(first.json.credentials.token);
      expect(oauth.stats.grants.client_credentials).toBe(2);
    } finally {
      oauth.setOptions({ extraTokenFields: {} });
    }
  });
});
