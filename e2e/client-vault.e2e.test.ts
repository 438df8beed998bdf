import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Latchkey, LatchkeyError } from '@latchkey/client';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { authorizationCodeTokens } from './support/oauth.js';
import { writeProvidersFile } from './support/providers.js';
import { createScopedKey, startStack, type Stack } from './support/stack.js';

/** Every vault-backed method of the TypeScript SDK, against the running stack. */

let stack: Stack;
let oauth: TestOAuthServer;
let latchkey: Latchkey;

function providersFile(): string {
  const lines = [
    'loopback-oauth:',
    '  display_name: Loopback OAuth',
    '  categories: [test]',
    '  auth_mode: OAUTH2',
    `  authorization_url: ${oauth.authorizationUrl}`,
    `  token_url: ${oauth.tokenUrl}`,
    'loopback-key:',
    '  display_name: Loopback API key',
    '  categories: [test]',
    '  auth_mode: API_KEY',
  ];
  return writeProvidersFile(`${lines.join('\n')}\n`);
}

/** A client whose key holds only the given scopes, made through the operator API. */
async function clientWith(scopes: string[]): Promise<Latchkey> {
  return new Latchkey({ host: stack.url, apiKey: await createScopedKey(stack, scopes) });
}

/** The LatchkeyError a call rejects with (fails the test when it resolves). */
async function failure(call: Promise<unknown>): Promise<LatchkeyError> {
  const error = await call.then(
    () => new Error('expected the call to fail'),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(LatchkeyError);
  return error as LatchkeyError;
}

const importKey = (integration: string, connectionId: string, extra: { tags?: Record<string, string>; metadata?: Record<string, unknown> } = {}) =>
  latchkey.createConnection({ provider_config_key: integration, connection_id: connectionId, credentials: { type: 'API_KEY', apiKey: `key-${connectionId}` }, ...extra });

const ids = (connections: Array<{ connection_id: string }>) => connections.map((item) => item.connection_id).sort();

beforeAll(async () => {
  oauth = await startOAuthServer();
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile(), PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  latchkey = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await oauth?.close();
});

describe('providers', () => {
  it('lists the catalog, searches it and reads one provider', async () => {
    const { data: all } = await latchkey.listProviders();
    expect(all.length).toBeGreaterThanOrEqual(250);
    expect(all.find((provider) => provider.name === 'github')).toMatchObject({ auth_mode: 'OAUTH2' });
    const { data: found } = await latchkey.listProviders({ search: 'loopback' });
    expect(found.map((provider) => provider.name).sort()).toEqual(['loopback-key', 'loopback-oauth']);
    const { data: one } = await latchkey.getProvider({ provider: 'loopback-oauth' });
    expect(one).toMatchObject({ name: 'loopback-oauth', auth_mode: 'OAUTH2', token_url: oauth.tokenUrl, categories: ['test'] });
    expect(await failure(latchkey.getProvider({ provider: 'no-such-provider' }))).toMatchObject({ status: 404, code: 'unknown_provider' });
  });
});

describe('integrations', () => {
  it('are created, listed as {configs} and read with webhook data and credentials', async () => {
    const { data: created } = await latchkey.createIntegration({
      provider: 'loopback-oauth',
      unique_key: 'oauth',
      display_name: 'OAuth',
      credentials: { client_id: 'test-client', client_secret: 'test-secret' },
    });
    // Create answers the API document's list form, exactly; the display name is on the full form.
    expect(Object.keys(created).sort()).toEqual(['created_at', 'logo', 'provider', 'unique_key', 'updated_at']);
    expect(created).toMatchObject({ unique_key: 'oauth', provider: 'loopback-oauth' });
    expect((await latchkey.getIntegration({ uniqueKey: 'oauth' })).data.display_name).toBe('OAuth');
    await latchkey.createIntegration({ provider: 'github', unique_key: 'gh', forward_webhooks: false });
    expect(await failure(latchkey.createIntegration({ provider: 'github', unique_key: 'gh' }))).toMatchObject({ status: 409, code: 'duplicate_provider_config' });

    const { configs } = await latchkey.listIntegrations();
    expect(configs.map((config) => config.unique_key)).toEqual(expect.arrayContaining(['oauth', 'gh']));
    // The list form has exactly the document's fields: no display name, and no client secret even for a full-access key.
    for (const config of configs) expect(Object.keys(config).sort()).toEqual(['created_at', 'logo', 'provider', 'unique_key', 'updated_at']);

    const { data: plain } = await latchkey.getIntegration({ uniqueKey: 'gh' });
    expect(plain).toMatchObject({ unique_key: 'gh', provider: 'github', forward_webhooks: false });
    expect(plain.credentials).toBeUndefined();
    expect(plain.webhook_url).toBeUndefined();
    const { data: webhook } = await latchkey.getIntegration({ uniqueKey: 'oauth' }, { include: ['webhook'] });
    expect(webhook.webhook_url).toMatch(/\/webhook\/[0-9a-f-]{36}\/oauth$/);
    expect(webhook.webhookSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(webhook.credentials).toBeUndefined();
    const { data: both } = await latchkey.getIntegration({ uniqueKey: 'oauth' }, { include: ['webhook', 'credentials'] });
    expect(both).toMatchObject({ webhookSecret: webhook.webhookSecret, credentials: { client_id: 'test-client', client_secret: 'test-secret' } });
    expect(await failure(latchkey.getIntegration({ uniqueKey: 'missing' }))).toMatchObject({ status: 404, code: 'unknown_provider_config' });
  });

  it('are updated field by field; a rename is allowed only without connections', async () => {
    const { data: updated } = await latchkey.updateIntegration({ uniqueKey: 'gh' }, { display_name: 'GitHub', integration_config: { a: '1' }, custom: { b: '2' } });
    expect(updated).toMatchObject({ unique_key: 'gh' });
    expect((await latchkey.getIntegration({ uniqueKey: 'gh' })).data).toMatchObject({ display_name: 'GitHub', forward_webhooks: false, integration_config: { a: '1' }, custom: { b: '2' } });

    const { data: renamed } = await latchkey.updateIntegration({ uniqueKey: 'gh' }, { unique_key: 'github' });
    expect(renamed.unique_key).toBe('github');
    expect(await failure(latchkey.getIntegration({ uniqueKey: 'gh' }))).toMatchObject({ status: 404, code: 'unknown_provider_config' });
    expect(await failure(latchkey.updateIntegration({ uniqueKey: 'github' }, { unique_key: 'oauth' }))).toMatchObject({ status: 409, code: 'duplicate_provider_config' });

    await latchkey.createIntegration({ provider: 'loopback-key', unique_key: 'keyed' });
    await importKey('keyed', 'pinned');
    const refused = await failure(latchkey.updateIntegration({ uniqueKey: 'keyed' }, { unique_key: 'keyed-2', display_name: 'ignored' }));
    expect(refused).toMatchObject({ status: 409, code: 'integration_has_connections' });
    expect((await latchkey.getIntegration({ uniqueKey: 'keyed' })).data.display_name).toBeUndefined();
    await latchkey.updateIntegration({ uniqueKey: 'keyed' }, { unique_key: 'keyed', display_name: 'Same key' });
    expect((await latchkey.getIntegration({ uniqueKey: 'keyed' })).data.display_name).toBe('Same key');
  });

  it('are deleted together with their connections', async () => {
    await latchkey.createIntegration({ provider: 'loopback-key', unique_key: 'doomed' });
    await importKey('doomed', 'd1');
    await importKey('doomed', 'd2');
    expect(ids((await latchkey.listConnections({ integrationId: 'doomed' })).connections)).toEqual(['d1', 'd2']);
    expect(await latchkey.deleteIntegration({ uniqueKey: 'doomed' })).toEqual({ success: true });
    expect(await failure(latchkey.getIntegration({ uniqueKey: 'doomed' }))).toMatchObject({ status: 404, code: 'unknown_provider_config' });
    expect((await latchkey.listConnections({ integrationId: 'doomed' })).connections).toEqual([]);
    await latchkey.createIntegration({ provider: 'loopback-key', unique_key: 'doomed' });
    expect(await failure(latchkey.getConnection('doomed', 'd1'))).toMatchObject({ status: 404, code: 'unknown_connection' });
    expect(await failure(latchkey.deleteIntegration({ uniqueKey: 'doomed-never' }))).toMatchObject({ status: 404, code: 'unknown_provider_config' });
  });
});

describe('connections', () => {
  beforeAll(async () => {
    await latchkey.createIntegration({ provider: 'loopback-key', unique_key: 'keys' });
    await latchkey.createIntegration({ provider: 'loopback-key', unique_key: 'keys-b' });
    await importKey('keys', 'alpha-1', { tags: { Team: 'red' }, metadata: { plan: 'pro' } });
    await importKey('keys', 'alpha-2', { tags: { team: 'blue' } });
    await importKey('keys-b', 'beta-1', { tags: { team: 'red' } });
  });

  it('are imported with createConnection and read back', async () => {
    const created = await importKey('keys', 'gamma', { tags: { End_User_Id: 'u-1' }, metadata: { a: 1 } });
    expect(created).toMatchObject({ connection_id: 'gamma', provider_config_key: 'keys', provider: 'loopback-key', tags: { end_user_id: 'u-1' }, metadata: { a: 1 } });
    expect(created.credentials).toEqual({ type: 'API_KEY', apiKey: 'key-gamma' });
    const read = await latchkey.getConnection('keys', 'gamma');
    expect(read).toMatchObject({ id: created.id, credentials: { type: 'API_KEY', apiKey: 'key-gamma' } });
    const plain = await clientWith(['environment:connections:read']);
    expect((await plain.getConnection('keys', 'gamma')).credentials).toBeUndefined();
    // Either read scope may force a refresh (the API document); the plain one still sees no credentials.
    expect((await plain.getConnection('keys', 'gamma', true)).credentials).toBeUndefined();
    const bad = await failure(latchkey.createConnection({ provider_config_key: 'keys', credentials: { type: 'API_KEY' } }));
    expect(bad).toMatchObject({ status: 400, code: 'invalid_body' });
    expect(bad.errors?.map((item) => item.path)).toContain('credentials.apiKey');
  });

  it('are listed with each filter', async () => {
    expect(ids((await latchkey.listConnections()).connections)).toEqual(expect.arrayContaining(['alpha-1', 'alpha-2', 'beta-1']));
    expect(ids((await latchkey.listConnections({ connectionId: 'alpha-1' })).connections)).toEqual(['alpha-1']);
    expect(ids((await latchkey.listConnections({ integrationId: 'keys-b' })).connections)).toEqual(['beta-1']);
    expect(ids((await latchkey.listConnections({ integrationId: ['keys-b', 'keys'] })).connections)).toEqual(expect.arrayContaining(['alpha-1', 'beta-1']));
    expect(ids((await latchkey.listConnections({ tags: { TEAM: 'red' } })).connections)).toEqual(['alpha-1', 'beta-1']);
    expect(ids((await latchkey.listConnections({ tags: { team: 'red' }, integrationId: 'keys' })).connections)).toEqual(['alpha-1']);
    expect(ids((await latchkey.listConnections({ search: 'ALPHA' })).connections)).toEqual(['alpha-1', 'alpha-2']);
    expect((await latchkey.listConnections({ search: 'alpha', limit: 1 })).connections).toHaveLength(1);
    // Filters combine: the connection id and the search must both match.
    expect(ids((await latchkey.listConnections({ connectionId: 'beta-1', search: 'alpha' })).connections)).toEqual([]);
    const item = (await latchkey.listConnections({ connectionId: 'alpha-1' })).connections[0]!;
    expect(item).toMatchObject({ provider_config_key: 'keys', provider: 'loopback-key', metadata: { plan: 'pro' }, tags: { team: 'red' }, errors: [] });
    expect(JSON.stringify(item)).not.toContain('key-alpha-1');
  });

  it('take new tags with patchConnection', async () => {
    expect(await latchkey.patchConnection({ connectionId: 'alpha-2', provider_config_key: 'keys' }, { tags: { Team: 'green', Tier: 'gold' } })).toEqual({ success: true });
    expect((await latchkey.getConnection('keys', 'alpha-2')).tags).toEqual({ team: 'green', tier: 'gold' });
    expect(ids((await latchkey.listConnections({ tags: { tier: 'gold' } })).connections)).toEqual(['alpha-2']);
    const missing = await failure(latchkey.patchConnection({ connectionId: 'nope', provider_config_key: 'keys' }, { tags: {} }));
    expect(missing).toMatchObject({ status: 404, code: 'unknown_connection' });
  });

  it('have metadata that is set (replaced) and updated (merged), for one id or several', async () => {
    expect(await latchkey.getMetadata('keys', 'alpha-1')).toEqual({ plan: 'pro' });
    expect(await latchkey.setMetadata('keys', 'alpha-1', { seats: 3 })).toEqual({ connection_id: 'alpha-1', provider_config_key: 'keys', metadata: { seats: 3 } });
    expect(await latchkey.getMetadata('keys', 'alpha-1')).toEqual({ seats: 3 });
    await latchkey.updateMetadata('keys', 'alpha-1', { region: 'eu' });
    expect(await latchkey.getMetadata('keys', 'alpha-1')).toEqual({ seats: 3, region: 'eu' });

    expect(await latchkey.setMetadata('keys', ['alpha-1', 'alpha-2'], { shared: true })).toMatchObject({ connection_id: ['alpha-1', 'alpha-2'] });
    expect(await latchkey.updateMetadata('keys', ['alpha-1', 'alpha-2'], { more: 1 })).toMatchObject({ metadata: { more: 1 } });
    for (const id of ['alpha-1', 'alpha-2']) expect(await latchkey.getMetadata('keys', id)).toEqual({ shared: true, more: 1 });

    const missing = await failure(latchkey.updateMetadata('keys', ['alpha-1', 'ghost'], { lost: true }));
    expect(missing).toMatchObject({ status: 404, code: 'unknown_connection' });
    expect(await latchkey.getMetadata('keys', 'alpha-1')).toEqual({ shared: true, more: 1 });
    expect(await failure(latchkey.getMetadata('keys', 'ghost'))).toMatchObject({ status: 404, code: 'unknown_connection' });
  });

  it('are deleted with deleteConnection', async () => {
    await expect(latchkey.deleteConnection('keys-b', 'beta-1')).resolves.toBeUndefined();
    expect(await failure(latchkey.getConnection('keys-b', 'beta-1'))).toMatchObject({ status: 404, code: 'unknown_connection' });
    expect(await failure(latchkey.deleteConnection('keys-b', 'beta-1'))).toMatchObject({ status: 404, code: 'unknown_connection' });
  });
});

describe('getConnection against a real OAuth 2 server', () => {
  it('honours forceRefresh and refreshToken', async () => {
    const tokens = await authorizationCodeTokens(oauth);
    const expires_at = new Date(Date.now() + 3600_000).toISOString();
    await latchkey.createConnection({
      provider_config_key: 'oauth',
      connection_id: 'user-1',
      credentials: { type: 'OAUTH2', access_token: tokens.access_token, refresh_token: tokens.refresh_token, expires_at, raw: {} },
    });
    oauth.stats.reset();

    const fresh = await latchkey.getConnection('oauth', 'user-1');
    expect(fresh.credentials).toMatchObject({ type: 'OAUTH2', access_token: tokens.access_token });
    expect(fresh.credentials?.['refresh_token']).toBeUndefined();
    expect((await latchkey.getConnection('oauth', 'user-1', false, true)).credentials?.['refresh_token']).toBe(tokens.refresh_token);
    expect(oauth.stats.tokenRequests).toBe(0);

    const forced = await latchkey.getConnection('oauth', 'user-1', true);
    expect(forced.credentials?.['access_token']).not.toBe(tokens.access_token);
    expect(forced.credentials?.['refresh_token']).toBeUndefined();
    expect(oauth.stats.grants.refresh_token).toBe(1);
    const works = await fetch(oauth.userinfoUrl, { headers: { authorization: `Bearer ${String(forced.credentials?.['access_token'])}` } });
    expect(works.status).toBe(200);

    const both = await latchkey.getConnection('oauth', 'user-1', true, true);
    expect(both.credentials?.['access_token']).not.toBe(forced.credentials?.['access_token']);
    expect(both.credentials?.['refresh_token']).toEqual(expect.any(String));
    expect(both.credentials?.['refresh_token']).not.toBe(tokens.refresh_token);
    expect(oauth.stats.grants.refresh_token).toBe(2);
  });
});

describe('LatchkeyError', () => {
  it('carries status, code and the scope that was missing', async () => {
    expect(await failure(new Latchkey({ host: stack.url, apiKey: 'lk_sk_unknown' }).listIntegrations())).toMatchObject({ status: 401, code: 'unknown_api_key' });
    const lister = await clientWith(['environment:integrations:list']);
    await expect(lister.listProviders()).resolves.toMatchObject({ data: expect.any(Array) });
    const denied = await failure(lister.createIntegration({ provider: 'github', unique_key: 'nope' }));
    expect(denied).toMatchObject({ status: 403, code: 'forbidden' });
    expect(denied.message).toContain('environment:integrations:create');
  });
});
