import { afterAll, beforeAll, expect, test } from '@jest/globals';
import mongoose from 'mongoose';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { writeProvidersFile } from '../support/providers.js';
import { createScopedKey, http, startStack, type Stack } from '../support/stack.js';

/**
 * The vault's part of the security run, written as the attacks. The stack allows only
 * 127.0.0.1/32 (PROXY_ALLOW_CIDRS, the proxy's and the vault's); a "provider" listening on
 * 127.0.0.3 stands for an address the operator did not allow, and counts every connection that
 * reaches it: each refusal must come before a socket opens. Canary secrets are planted in the
 * integrations' client secrets, the end user's client and a refresh token, and must never come
 * back in an answer, reach a host they must not, or show up in a service's output.
 */

const canary = (what: string) => `canary-${what}-${randomBytes(10).toString('hex')}`;
const CLIENT_SECRET = canary('client-secret');
const TENANT_CLIENT_SECRET = canary('tenant-client-secret');
const TRAP_CLIENT_SECRET = canary('trap-client-secret');
const CC_CLIENT_SECRET = canary('cc-client-secret');
const REFRESH_TOKEN = canary('refresh-token');
const SESSION_CLIENT_SECRET = canary('session-client-secret');
const CANARIES = [CLIENT_SECRET, TENANT_CLIENT_SECRET, TRAP_CLIENT_SECRET, CC_CLIENT_SECRET, REFRESH_TOKEN, SESSION_CLIENT_SECRET];

let stack: Stack;
let oauth: TestOAuthServer;
/** A token endpoint on 127.0.0.3, which the operator did not allow. */
let trap: Server;
const trapSeen = { connections: 0, bodies: [] as string[] };
/** Every body the tests received from the stack, to look for canaries in. */
const answers: string[] = [];

const api = async (method: string, path: string, body?: unknown) => {
  const result = await http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
  answers.push(JSON.stringify(result.json ?? null));
  return result;
};

async function get(url: string | URL): Promise<{ status: number; location: string | null; text: string }> {
  const response = await fetch(url, { redirect: 'manual' });
  const text = await response.text();
  answers.push(text, response.headers.get('location') ?? '');
  return { status: response.status, location: response.headers.get('location'), text };
}

async function session(body: Record<string, unknown>): Promise<string> {
  const created = await api('POST', '/connect/sessions', body);
  expect(created.status).toBe(201);
  return created.json.data.token as string;
}

beforeAll(async () => {
  oauth = await startOAuthServer({ sendIssuer: true, clients: [{ client_id: 'sec-client', client_secret: CLIENT_SECRET }] });
  trap = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      trapSeen.bodies.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"access_token":"trap-token","expires_in":3600}');
    });
  });
  trap.on('connection', () => (trapSeen.connections += 1));
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.3', resolve));
  const trapUrl = `http://127.0.0.3:${(trap.address() as AddressInfo).port}/token`;

  const providersFile = writeProvidersFile(
    [
      'sec-oauth:',
      '  display_name: Security OAuth',
      '  categories: [test]',
      '  auth_mode: OAUTH2',
      `  authorization_url: ${oauth.authorizationUrl}`,
      `  token_url: ${oauth.tokenUrl}`,
      `  issuer: ${oauth.url}`,
      '  authorization_response_iss_parameter_supported: true',
      'sec-tenant:',
      '  display_name: Security tenant OAuth',
      '  categories: [test]',
      '  auth_mode: OAUTH2',
      "  authorization_url: 'https://${connectionConfig.subdomain}.provider.example/authorize'",
      "  token_url: 'https://${connectionConfig.subdomain}.provider.example/token'",
      '  connection_configuration: [subdomain]',
      '  connection_config:',
      '    subdomain:',
      '      type: string',
      "      pattern: '^[A-Za-z0-9-]+$'",
      'sec-self-hosted:',
      '  display_name: Security self-hosted OAuth',
      '  categories: [test]',
      '  auth_mode: OAUTH2',
      "  authorization_url: 'https://${connectionConfig.host}/authorize'",
      "  token_url: 'https://${connectionConfig.host}/token'",
      '  connection_configuration: [host]',
      '  connection_config:',
      '    host:',
      '      type: string',
      "      pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$'",
      'sec-trap-token:',
      '  display_name: Token endpoint on a refused address',
      '  categories: [test]',
      '  auth_mode: OAUTH2',
      `  authorization_url: ${oauth.authorizationUrl}`,
      `  token_url: ${trapUrl}`,
      'sec-trap-oauth1:',
      '  display_name: OAuth 1 endpoints on a refused address',
      '  categories: [test]',
      '  auth_mode: OAUTH1',
      `  authorization_url: ${oauth.authorizationUrl}`,
      `  request_url: ${trapUrl}`,
      `  token_url: ${trapUrl}`,
      'sec-api-key:',
      '  display_name: Security API key',
      '  categories: [test]',
      '  auth_mode: API_KEY',
      '  proxy:',
      `    base_url: ${oauth.url}`,
      '    headers:',
      "      X-Api-Key: '${apiKey}'",
      'sec-basic:',
      '  display_name: Security basic auth',
      '  categories: [test]',
      '  auth_mode: BASIC',
      '  proxy:',
      `    base_url: ${oauth.url}`,
      'sec-self-hosted-app:',
      '  display_name: Security self-hosted App',
      '  categories: [test]',
      '  auth_mode: APP',
      "  token_url: 'https://${connectionConfig.host}/app/installations/${connectionConfig.installation_id}/access_tokens'",
      '  connection_configuration: [host, installation_id]',
      '  connection_config:',
      '    host:',
      '      type: string',
      "      pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$'",
      'sec-trap-cc:',
      '  display_name: Client credentials on a refused address',
      '  categories: [test]',
      '  auth_mode: OAUTH2_CC',
      `  token_url: ${trapUrl}`,
      '',
    ].join('\n'),
  );
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  for (const [unique_key, provider, secret] of [
    ['oauth', 'sec-oauth', CLIENT_SECRET],
    ['tenant', 'sec-tenant', TENANT_CLIENT_SECRET],
    ['selfhosted', 'sec-self-hosted', TENANT_CLIENT_SECRET],
    ['trap', 'sec-trap-token', TRAP_CLIENT_SECRET],
    ['trap-cc', 'sec-trap-cc', TRAP_CLIENT_SECRET],
    ['trap-oauth1', 'sec-trap-oauth1', TRAP_CLIENT_SECRET],
  ] as const) {
    expect((await api('POST', '/integrations', { provider, unique_key, credentials: { client_id: 'sec-client', client_secret: secret } })).status).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await oauth?.close();
  trap?.close();
});

test('case 3: an end user cannot override the subdomain the customer set for the session', async () => {
  const token = await session({ allowed_integrations: ['tenant'], integrations_config_defaults: { tenant: { connection_config: { subdomain: 'acme' } } } });

  const overridden = await get(`${stack.url}/oauth/connect/tenant?connect_session_token=${token}&params[subdomain]=attacker`);
  expect(overridden.status).toBe(400);
  expect(overridden.text).toContain('connection_config.subdomain');
  const viaPage = await http(`${stack.url}/oauth/connect/tenant?connect_session_token=${token}`, { method: 'POST', body: { connection_config: { subdomain: 'attacker' } } });
  answers.push(JSON.stringify(viaPage.json));
  expect(viaPage.status).toBe(400);
  expect(viaPage.json.error.code).toBe('invalid_body');

  // The customer's value is what the flow uses.
  const started = await get(`${stack.url}/oauth/connect/tenant?connect_session_token=${token}`);
  expect(started.status).toBe(302);
  expect(new URL(started.location!).host).toBe('acme.provider.example');
});

test("case 3: an end user cannot name the token host that the customer's OAuth client, set in the session, is sent to", async () => {
  // A self-hosted provider's host is the whole token URL's: the customer's client secret goes
  // there when the code is exchanged, and on every refresh after.
  const customerClient = { oauth_client_id_override: 'customer-client', oauth_client_secret_override: SESSION_CLIENT_SECRET };
  const token = await session({ allowed_integrations: ['selfhosted'], integrations_config_defaults: { selfhosted: { connection_config: customerClient } } });
  const refused = await get(`${stack.url}/oauth/connect/selfhosted?connect_session_token=${token}&params[host]=evil.example`);
  expect(refused.status).toBe(400);
  expect(refused.location).toBeNull();
  expect(refused.text).toContain('connection_config.host');

  // The host the customer set with their client is what the flow uses.
  const withHost = await session({ allowed_integrations: ['selfhosted'], integrations_config_defaults: { selfhosted: { connection_config: { ...customerClient, host: 'sso.customer.example' } } } });
  const started = await get(`${stack.url}/oauth/connect/selfhosted?connect_session_token=${withHost}`);
  expect(started.status).toBe(302);
  expect(new URL(started.location!).host).toBe('sso.customer.example');
  expect(new URL(started.location!).searchParams.get('client_id')).toBe('customer-client');
});

test("case 3: a key that may not read the integration's client secret cannot name the token host it is sent to, by import or by a session's defaults", async () => {
  const importer = await createScopedKey(stack, ['environment:connections:create']);
  const sessionMaker = await createScopedKey(stack, ['environment:connect_sessions:write']);
  const as = (token: string, method: string, path: string, body: unknown) => http(`${stack.url}${path}`, { method, token, body });
  // Refreshed at the next read: the integration's client id and secret would go to the host named.
  const refreshable = { type: 'OAUTH2', access_token: 't', refresh_token: 'r', expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} };
  const importing = (connection_id: string, credentials: Record<string, unknown>) => ({ provider_config_key: 'selfhosted', connection_id, credentials, connection_config: { host: 'evil.example' } });

  const refused = await as(importer, 'POST', '/connections', importing('stolen', refreshable));
  answers.push(JSON.stringify(refused.json));
  expect({ status: refused.status, code: refused.json.error?.code, paths: refused.json.error.errors?.map((item: { path: string }) => item.path) }).toEqual({
    status: 400,
    code: 'invalid_body',
    paths: ['connection_config.host'],
  });
  expect((await api('GET', '/connections/stolen?provider_config_key=selfhosted')).status).toBe(404);
  // With the connection's own OAuth client, or a key that may read the integration's, it is the caller's to name.
  const ownClient = { ...refreshable, config_override: { client_id: 'own', client_secret: 'own-secret' } };
  expect((await as(importer, 'POST', '/connections', importing('own-client', ownClient))).status).toBe(201);
  expect((await api('POST', '/connections', importing('customer', refreshable))).status).toBe(201);

  const defaults = { allowed_integrations: ['selfhosted'], integrations_config_defaults: { selfhosted: { connection_config: { host: 'evil.example' } } } };
  const session = await as(sessionMaker, 'POST', '/connect/sessions', defaults);
  answers.push(JSON.stringify(session.json));
  expect({ status: session.status, code: session.json.error?.code }).toEqual({ status: 400, code: 'invalid_body' });
  expect((await api('POST', '/connect/sessions', defaults)).status).toBe(201);
});

test("case 3: a key that may not read the integration's private key cannot import an App connection naming the host its signed JWT is sent to", async () => {
  const appKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  expect((await api('POST', '/integrations', { provider: 'sec-self-hosted-app', unique_key: 'selfhosted-app', credentials: { app_id: '12345', private_key: appKey } })).status).toBe(201);
  const importer = await createScopedKey(stack, ['environment:connections:create']);
  // Expired: its next read would sign a JWT as the App and send it to the host named.
  const importing = (connection_id: string) => ({
    provider_config_key: 'selfhosted-app',
    connection_id,
    credentials: { type: 'APP', access_token: 'ghs_x', expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} },
    connection_config: { host: 'evil.example', installation_id: '1' },
  });
  const refused = await http(`${stack.url}/connections`, { method: 'POST', token: importer, body: importing('app-stolen') });
  answers.push(JSON.stringify(refused.json));
  expect({ status: refused.status, code: refused.json.error?.code, paths: refused.json.error.errors?.map((item: { path: string }) => item.path) }).toEqual({
    status: 400,
    code: 'invalid_body',
    paths: ['connection_config.host'],
  });
  expect((await api('GET', '/connections/app-stolen?provider_config_key=selfhosted-app')).status).toBe(404);
  // A key that may read the integration's credentials names it as its own.
  expect((await api('POST', '/connections', importing('app-customer'))).status).toBe(201);
});

test.each(['evil.example/x?', '127.0.0.1:4701', 'evil.example#', 'user@evil.example'])(
  'case 3: a host-bearing connection config value %j is refused before the flow starts',
  async (value) => {
    const token = await session({ allowed_integrations: ['tenant'] });
    const refused = await get(`${stack.url}/oauth/connect/tenant?connect_session_token=${token}&params[subdomain]=${encodeURIComponent(value)}`);
    expect(refused.status).toBe(400);
    expect(refused.location).toBeNull();
    expect(refused.text).toContain('connection_config.subdomain');
    // A single DNS label that matches the catalog's pattern is what works.
    const accepted = await get(`${stack.url}/oauth/connect/tenant?connect_session_token=${token}&params[subdomain]=acme`);
    expect(new URL(accepted.location!).host).toBe('acme.provider.example');
  },
);

test('case 3: a code exchange with a token endpoint on an address the operator did not allow is refused before any socket opens', async () => {
  const token = await session({ allowed_integrations: ['trap'] });
  const started = await get(`${stack.url}/oauth/connect/trap?connect_session_token=${token}`);
  expect(started.status).toBe(302);
  const consent = await get(started.location!);
  const callback = await get(consent.location!);
  // The end user hears what an endpoint that could not be reached says: nothing of the address.
  expect(callback.status).toBe(424);
  expect(callback.text).toContain('could not be reached');
  expect(callback.text).not.toContain('not allowed');
  expect(trapSeen.connections).toBe(0);
});

test('case 3: a refresh with a token endpoint on an address the operator did not allow is refused before any socket opens', async () => {
  // The import's own answer echoes what the customer sent; it is not among the answers searched.
  const imported = await http(`${stack.url}/connections`, {
    method: 'POST',
    token: stack.bootstrapKey,
    body: {
      provider_config_key: 'trap',
    connection_id: 'trap-refresh',
      credentials: { type: 'OAUTH2', access_token: 'old', refresh_token: REFRESH_TOKEN, expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} },
    },
  });
  expect(imported.status).toBe(201);
  const fetched = await api('GET', '/connections/trap-refresh?provider_config_key=trap&force_refresh=true');
  expect(fetched.status).toBe(400);
  expect(fetched.json.error.code).toBe('upstream_not_allowed');
  expect(trapSeen.connections).toBe(0);
});

test('case 3: client credentials with a token endpoint on an address the operator did not allow are refused before any socket opens', async () => {
  const token = await session({ allowed_integrations: ['trap-cc'] });
  const saved = await http(`${stack.url}/auth/oauth2_cc/trap-cc?connect_session_token=${token}`, { method: 'POST', body: { client_id: 'sec-client', client_secret: CC_CLIENT_SECRET } });
  answers.push(JSON.stringify(saved.json));
  expect(saved.status).toBe(400);
  expect(saved.json.error).toMatchObject({ code: 'connection_test_failed', payload: { error: 'unreachable' } });
  expect(trapSeen.connections).toBe(0);
});

test('case 3: an OAuth 1 temporary-token request to an address the operator did not allow is refused before any socket opens', async () => {
  const token = await session({ allowed_integrations: ['trap-oauth1'] });
  const started = await get(`${stack.url}/oauth/connect/trap-oauth1?connect_session_token=${token}`);
  expect(started.status).toBe(424);
  expect(JSON.parse(started.text).error).toEqual({ code: 'refresh_token_external_error', message: expect.any(String), payload: { error: 'unreachable' } });
  expect(trapSeen.connections).toBe(0);
});

test('case 3: an authorization response with a mismatching or missing iss is refused before the code is exchanged', async () => {
  const runTo = async (token: string): Promise<URL> => {
    const started = await get(`${stack.url}/oauth/connect/oauth?connect_session_token=${token}`);
    const consent = await get(started.location!);
    return new URL(consent.location!);
  };
  const exchanges = () => oauth.stats.grants.authorization_code;
  const before = exchanges();

  const mixedUp = await runTo(await session({ allowed_integrations: ['oauth'] }));
  expect(mixedUp.searchParams.get('iss')).toBe(oauth.url);
  mixedUp.searchParams.set('iss', 'https://attacker.example');
  const refused = await get(mixedUp);
  expect(refused.status).toBe(400);
  expect(refused.text).toContain('another issuer');

  const withoutIss = await runTo(await session({ allowed_integrations: ['oauth'] }));
  withoutIss.searchParams.delete('iss');
  expect((await get(withoutIss)).status).toBe(400);
  expect(exchanges()).toBe(before);

  // The provider's own iss completes the flow.
  const honest = await get(await runTo(await session({ allowed_integrations: ['oauth'] })));
  expect(honest.status).toBe(200);
  expect(exchanges()).toBe(before + 1);
});

test('case 3: the canary secrets never reach a host they must not, an answer, or a service log', async () => {
  expect(trapSeen.connections).toBe(0);
  expect(trapSeen.bodies).toEqual([]);
  // The only token endpoint that saw a client secret is the provider that owns it.
  for (const record of oauth.stats.tokenRequestLog) expect(record.body['client_secret'] ?? CLIENT_SECRET).toBe(CLIENT_SECRET);
  const everything = [...answers, ...[...stack.gateways, ...stack.services].map((process) => process.output())].join('\n');
  for (const secret of CANARIES) expect(everything).not.toContain(secret);
});

test('case 22: an auditor reading the vault database finds no credential in plaintext', async () => {
  const imported = { apiKey: canary('api-key'), password: canary('password'), accessToken: canary('access-token'), refreshToken: canary('imported-refresh-token') };
  for (const [unique_key, provider] of [['api-key', 'sec-api-key'], ['basic', 'sec-basic']] as const) {
    expect((await api('POST', '/integrations', { provider, unique_key })).status).toBe(201);
  }
  const connections = [
    { provider_config_key: 'api-key', connection_id: 'at-rest-1', credentials: { type: 'API_KEY', apiKey: imported.apiKey } },
    { provider_config_key: 'basic', connection_id: 'at-rest-2', credentials: { type: 'BASIC', username: 'ada', password: imported.password } },
    {
      provider_config_key: 'oauth',
      connection_id: 'at-rest-3',
      credentials: { type: 'OAUTH2', access_token: imported.accessToken, refresh_token: imported.refreshToken, expires_at: new Date(Date.now() + 3600_000).toISOString(), raw: {} },
    },
  ];
  for (const connection of connections) {
    expect((await api('POST', '/connections', connection)).status).toBe(201);
    // A read with credentials: the audit of reads is stored too.
    const read = await api('GET', `/connections/${connection.connection_id}?provider_config_key=${connection.provider_config_key}`);
    expect(read.status).toBe(200);
  }
  // And whatever the flows above stored: tokens the provider issued (refreshed once more here,
  // so refresh writes are covered) and the integrations' webhook secrets.
  const issued: string[] = [];
  for (const { connection_id, provider_config_key } of (await api('GET', '/connections')).json.connections as Array<{ connection_id: string; provider_config_key: string }>) {
    const read = await api('GET', `/connections/${connection_id}?provider_config_key=${provider_config_key}&refresh_token=true&force_refresh=${connection_id.startsWith('at-rest') ? 'false' : 'true'}`);
    const credentials = (read.json?.credentials ?? {}) as Record<string, unknown>;
    for (const field of ['access_token', 'refresh_token', 'apiKey', 'password', 'token']) {
      const value = credentials[field];
      if (typeof value === 'string' && value.length >= 8) issued.push(value);
    }
  }
  for (const { unique_key } of (await api('GET', '/integrations')).json.data as Array<{ unique_key: string }>) {
    const secret = (await api('GET', `/integrations/${unique_key}?include=webhook`)).json.data.webhookSecret;
    if (typeof secret === 'string') issued.push(secret);
  }
  expect(issued).toEqual(expect.arrayContaining([imported.apiKey, imported.password, imported.accessToken]));
  // A connect session that carries the customer's own OAuth client for its flow.
  const sessionClientSecret = canary('session-client-secret');
  const session = await api('POST', '/connect/sessions', {
    allowed_integrations: ['oauth'],
    integrations_config_defaults: { oauth: { connection_config: { oauth_client_id_override: 'own-client', oauth_client_secret_override: sessionClientSecret } } },
  });
  expect(session.status).toBe(201);
  issued.push(sessionClientSecret);
  await new Promise((resolve) => setTimeout(resolve, 1500)); // let the audit batch land

  // What a stolen database holds: every document of every collection of the vault's database.
  const db = await mongoose.createConnection(stack.mongo.uri, { dbName: stack.dbName('credential-vault') }).asPromise();
  try {
    const collections = await db.db!.listCollections().toArray();
    let dump = '';
    for (const { name } of collections) dump += JSON.stringify(await db.db!.collection(name).find({}).toArray());
    expect(collections.map((collection) => collection.name)).toEqual(expect.arrayContaining(['connections', 'integrations', 'data_keys', 'credential_reads']));
    for (const secret of [...CANARIES, ...Object.values(imported), ...issued]) expect(dump).not.toContain(secret);
  } finally {
    await db.close();
  }
});
