import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { repoRoot, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { join } from 'node:path';
import mongoose from 'mongoose';
import { deployWithCli } from '../support/functions.js';
import { writeProvidersFile } from '../support/providers.js';
import { createScopedKey, http, startStack, type Stack } from '../support/stack.js';

/**
 * Attacks on what the proxy sends, and where, made as an attacker would: with a key that holds
 * only `environment:proxy`, against connections whose credentials are canaries (distinctive
 * random strings). The provider and a foreign host are real HTTP servers on loopback that record
 * what reaches them; a canary must reach the provider's own host and nothing else, and never
 * come back in an answer or a log.
 */

let stack: Stack;
/** The provider's API. */
let provider: TestUpstreamApi;
/** A host the attacker controls. */
let foreign: TestUpstreamApi;
let proxyKey: string;

const canary = (name: string) => `canary-${name}-${randomBytes(12).toString('hex')}`;
const API_KEY = canary('api-key');
const SCOPED_KEY = canary('scoped-key');
const BASIC_PASSWORD = canary('basic-password');
const SUB_KEY = canary('subdomain-key');
const STORE_KEY = canary('store-key');
const ALLOWED_KEY = canary('allowed-key');
const QUERY_KEY = canary('query-key');
const OAUTH_TOKEN = canary('oauth-token');
/** In every service's environment: nothing a caller sends may bring it out. */
const ENV_SECRET = canary('environment');
const CANARIES = [API_KEY, QUERY_KEY, OAUTH_TOKEN, SCOPED_KEY, BASIC_PASSWORD, SUB_KEY, STORE_KEY, ALLOWED_KEY, ENV_SECRET];

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): any;
}

const answers: string[] = [];

/**
 * A request exactly as given: `node:http` sends the target and headers unnormalised (fetch
 * would resolve `..` and refuse some headers before anything left).
 */
function raw(path: string, headers: Array<[string, string]>, method = 'GET', body?: string): Promise<Answer> {
  const url = new URL(stack.url);
  return new Promise((resolve, reject) => {
    // Raw headers (an array) are sent as they are: Host too must be given.
    const rawHeaders = [['Host', url.host], ...headers].flat() as unknown as Record<string, string>;
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: rawHeaders }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        answers.push(text, JSON.stringify(res.headers));
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A proxied call with the proxy-only key; the connection is named like its integration unless given. */
function proxy(path: string, integration: string, headers: Array<[string, string]> = [], connection = integration): Promise<Answer> {
  return raw(`/proxy${path}`, [['Authorization', `Bearer ${proxyKey}`], ['Connection-Id', connection], ['Provider-Config-Key', integration], ...headers]);
}

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

async function created(path: string, body: unknown): Promise<void> {
  const response = await api('POST', path, body);
  if (response.status !== 201) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(response.json)}`);
}

/**
 * A connection whose config the vault holds unchecked, as one stored before it checked config
 * against the API URL (or before its provider entry was edited) would be: imported with a value
 * that passes, then given `config` in the vault's database directly.
 */
async function storedUnchecked(integration: string, connectionId: string, config: Record<string, string>, credentials: unknown): Promise<void> {
  const passing = Object.fromEntries(Object.keys(config).map((key) => [key, 'passing']));
  await created('/connections', { provider_config_key: integration, connection_id: connectionId, connection_config: passing, credentials });
  const db = await mongoose.createConnection(stack.mongo.uri, { dbName: stack.dbName('credential-vault') }).asPromise();
  try {
    const { matchedCount } = await db.db!.collection('connections').updateOne({ connection_id: connectionId, provider_config_key: integration }, { $set: { connection_config: config } });
    expect(matchedCount).toBe(1);
  } finally {
    await db.close();
  }
}

/** Every request the attacker's host received, as text. */
const foreignSaw = () => JSON.stringify(foreign.requests);

beforeAll(async () => {
  provider = await startUpstreamApi();
  foreign = await startUpstreamApi();
  const port = new URL(provider.url).port;
  const providersFile = writeProvidersFile(`sec-api:
  display_name: Security API
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: ${provider.url}
    headers:
      X-Api-Key: \${apiKey}
sec-scoped:
  display_name: Security scoped
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: ${provider.url}/api
    headers:
      X-Api-Key: \${apiKey}
sec-query:
  display_name: Security query key
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: ${provider.url}
    query:
      api_key: \${apiKey}
sec-basic:
  display_name: Security basic
  categories: [test]
  auth_mode: BASIC
  proxy:
    base_url: ${provider.url}
sec-oauth:
  display_name: Security OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: http://127.0.0.1:9/authorize
  token_url: http://127.0.0.1:9/token
  proxy:
    base_url: ${provider.url}
sec-none:
  display_name: Security no auth
  categories: [test]
  auth_mode: NONE
  proxy:
    base_url: ${provider.url}
sec-subdomain:
  display_name: Security subdomain
  categories: [test]
  auth_mode: API_KEY
  connection_configuration: [subdomain]
  proxy:
    base_url: http://\${connectionConfig.subdomain}.invalid:${port}/api
    headers:
      X-Api-Key: \${apiKey}
sec-store:
  display_name: Security store
  categories: [test]
  auth_mode: API_KEY
  connection_configuration: [store]
  proxy:
    base_url: ${provider.url}/stores/\${connectionConfig.store}
    headers:
      X-Api-Key: \${apiKey}
`);
  stack = await startStack({
    env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32', PROXY_TIMEOUT_MS: '3000', LATCHKEY_SECURITY_CANARY: ENV_SECRET },
  });

  const key = await http(`${stack.url}/admin/environments/dev/api-keys`, {
    method: 'POST',
    token: stack.adminToken,
    body: { display_name: 'proxy only', scopes: ['environment:proxy'] },
  });
  proxyKey = key.json.data.secret as string;

  await created('/integrations', { provider: 'sec-api', unique_key: 'api' });
  await created('/connections', { provider_config_key: 'api', connection_id: 'api', credentials: { type: 'API_KEY', apiKey: API_KEY } });
  await created('/integrations', { provider: 'sec-scoped', unique_key: 'scoped' });
  await created('/connections', { provider_config_key: 'scoped', connection_id: 'scoped', credentials: { type: 'API_KEY', apiKey: SCOPED_KEY } });
  await created('/integrations', { provider: 'sec-query', unique_key: 'query' });
  await created('/connections', { provider_config_key: 'query', connection_id: 'query', credentials: { type: 'API_KEY', apiKey: QUERY_KEY } });
  await created('/integrations', { provider: 'sec-basic', unique_key: 'basic' });
  await created('/connections', { provider_config_key: 'basic', connection_id: 'basic', credentials: { type: 'BASIC', username: 'ada', password: BASIC_PASSWORD } });
  await created('/integrations', { provider: 'sec-oauth', unique_key: 'oauth', credentials: { client_id: 'client', client_secret: 'secret' } });
  // No expiry: the token is never refreshed, so the token URL is never called.
  await created('/connections', { provider_config_key: 'oauth', connection_id: 'oauth', credentials: { type: 'OAUTH2', access_token: OAUTH_TOKEN, raw: {} } });
  await created('/integrations', { provider: 'sec-none', unique_key: 'none' });
  await created('/connections', { provider_config_key: 'none', connection_id: 'none', credentials: { type: 'NONE' } });
  await created('/integrations', { provider: 'sec-subdomain', unique_key: 'subdomain' });
  await created('/integrations', { provider: 'sec-store', unique_key: 'store' });
}, 90_000);

afterAll(async () => {
  // No canary in any process's log.
  if (stack) {
    const logs = [...stack.gateways, ...stack.services].map((proc) => proc.output()).join('\n');
    for (const secret of CANARIES) expect(logs).not.toContain(secret);
    // No canary in any answer an attacker got.
    const seen = answers.join('\n');
    for (const secret of CANARIES) expect(seen).not.toContain(secret);
  }
  await stack?.dispose();
  await provider?.close();
  await foreign?.close();
});

describe('what the proxy sends, and where', () => {
  test('case 8: a Base-Url-Override to a foreign host gets no credential', async () => {
    foreign.reset();
    const foreignPort = new URL(foreign.url).port;
    const providerPort = new URL(provider.url).port;
    // The attacker's host, another name for it, and another name for the provider's own address are all other hosts.
    for (const override of [foreign.url, `http://localhost:${foreignPort}`, `http://localhost:${providerPort}`, `${foreign.url}/echo`]) {
      const response = await proxy('/echo', 'api', [['Base-Url-Override', override]]);
      expect(response.status).toBe(400);
      expect(response.json().error.code).toBe('upstream_not_allowed');
      expect(response.json().error.message).toContain('allowed_hosts');
    }
    expect(foreign.requests).toHaveLength(0);
    expect(foreignSaw()).not.toContain(API_KEY);
    expect(JSON.stringify(provider.requests)).not.toContain(ENV_SECRET);
  });

  test("case 8: an override reaches a host only once the integration's allowed_hosts names it", async () => {
    const foreignHost = new URL(foreign.url).host;
    await created('/integrations', { provider: 'sec-api', unique_key: 'allowed', allowed_hosts: ['Docs.Example.com'] });
    await created('/connections', { provider_config_key: 'allowed', connection_id: 'allowed', credentials: { type: 'API_KEY', apiKey: ALLOWED_KEY } });
    expect((await api('GET', '/integrations/allowed')).json.data.allowed_hosts).toEqual(['docs.example.com']);
    foreign.reset();
    expect((await proxy('/echo', 'allowed', [['Base-Url-Override', foreign.url]])).status).toBe(400);
    expect(foreign.requests).toHaveLength(0);

    // Only a key allowed to update integrations can widen where credentials go.
    const widen = await raw('/integrations/allowed', [['Authorization', `Bearer ${proxyKey}`], ['Content-Type', 'application/json']], 'PATCH');
    expect(widen.status).toBe(403);
    // And to read the connections' credentials: widening sends every connection's credential to
    // the hosts named, as reading them would.
    const updater = await createScopedKey(stack, ['environment:integrations:update', 'environment:integrations:create', 'environment:proxy']);
    const asUpdater = (method: string, path: string, body: unknown) => http(`${stack.url}${path}`, { method, token: updater, body });
    for (const [method, path, body] of [
      ['PATCH', '/integrations/allowed', { allowed_hosts: [foreignHost] }],
      ['POST', '/integrations', { provider: 'sec-api', unique_key: 'widened', allowed_hosts: [foreignHost] }],
    ] as const) {
      const refused = await asUpdater(method, path, body);
      expect({ status: refused.status, code: refused.json.error?.code, scope: refused.json.error?.payload?.scope }).toEqual({
        status: 403,
        code: 'forbidden',
        scope: 'environment:connections:read_credentials',
      });
    }
    expect((await api('GET', '/integrations/allowed')).json.data.allowed_hosts).toEqual(['docs.example.com']);
    expect((await api('GET', '/integrations/widened')).status).toBe(404);
    // Other changes, and narrowing to none, need no more than the update scope.
    expect((await asUpdater('PATCH', '/integrations/allowed', { display_name: 'Allowed' })).status).toBe(200);
    expect((await api('PATCH', '/integrations/allowed', { allowed_hosts: ['http://evil.example/'] })).json.error.code).toBe('invalid_body');
    expect((await api('PATCH', '/integrations/allowed', { allowed_hosts: [foreignHost] })).status).toBe(200);
    expect((await api('GET', '/integrations/allowed')).json.data.allowed_hosts).toEqual([foreignHost]);

    const response = await proxy('/echo', 'allowed', [['Base-Url-Override', foreign.url]]);
    expect(response.status).toBe(200);
    expect(foreign.requests).toHaveLength(1);
    expect(foreign.requests[0]!.headers['x-api-key']).toBe(ALLOWED_KEY);
    // The answer is the provider's echo, canary included: keep it out of the no-canary check.
    answers.pop();
    answers.pop();
    // Another integration's credential still cannot go there.
    foreign.reset();
    expect((await proxy('/echo', 'api', [['Base-Url-Override', foreign.url]])).status).toBe(400);
    expect(foreign.requests).toHaveLength(0);
  });

  test('case 9: service-proxy-Host cannot replace the Host sent with the credential', async () => {
    provider.reset();
    const response = await proxy('/echo', 'api', [['service-proxy-Host', 'evil.example'], ['X-Forwarded-Host', 'evil.example']]);
    expect(response.status).toBe(200);
    answers.splice(-2);
    expect(provider.requests).toHaveLength(1);
    const seen = provider.requests[0]!.headers;
    expect(seen.host).toBe(new URL(provider.url).host);
    expect(seen['x-api-key']).toBe(API_KEY);
    expect(seen['x-forwarded-host']).toBeUndefined();
  });

  test('case 9: an unprefixed Cookie, and X-Forwarded-*, Forwarded, Via, Proxy-*, transport headers and headers named in Connection prefixed or not, never reach the provider', async () => {
    provider.reset();
    const response = await proxy('/echo', 'api', [
      ['Cookie', 'session=attacker'],
      ['X-Forwarded-For', '10.0.0.1'],
      ['service-proxy-X-Forwarded-For', '10.0.0.2'],
      ['service-proxy-X-Forwarded-Proto', 'http'],
      ['Forwarded', 'for=10.0.0.1'],
      ['service-proxy-Forwarded', 'for=10.0.0.2'],
      ['service-proxy-Via', '1.1 evil'],
      ['service-proxy-X-Real-IP', '10.0.0.2'],
      ['service-proxy-Proxy-Authorization', 'Basic attacker'],
      ['Proxy-Foo', 'bar'],
      ['Connection', 'X-Hop-Secret'],
      ['X-Hop-Secret', 'hop'],
      ['service-proxy-Connection', 'X-Hop-Other'],
      ['service-proxy-X-Hop-Other', 'hop2'],
      ['service-proxy-Keep-Alive', 'timeout=1'],
      ['service-proxy-TE', 'trailers'],
      ['service-proxy-Transfer-Encoding', 'chunked'],
      ['service-proxy-Content-Length', '5'],
      ['X-Kept', 'kept'],
    ]);
    expect(response.status).toBe(200);
    answers.splice(-2);
    const seen = provider.requests[0]!.headers;
    for (const name of ['cookie', 'x-forwarded-for', 'x-forwarded-proto', 'forwarded', 'via', 'x-real-ip', 'proxy-authorization', 'proxy-foo', 'x-hop-secret', 'x-hop-other', 'keep-alive', 'te', 'transfer-encoding', 'content-length']) {
      expect([name, seen[name]]).toEqual([name, undefined]);
    }
    expect(seen['x-kept']).toBe('kept');
    expect(seen['x-api-key']).toBe(API_KEY);
  });

  test('case 9: a prefixed Authorization and Cookie reach a provider whose credentials go in another header, in the query, or nowhere; the unprefixed ones never do', async () => {
    for (const integration of ['api', 'query', 'none']) {
      provider.reset();
      const response = await proxy('/echo', integration, [
        ['service-proxy-Authorization', 'Bearer caller-token'],
        ['Cookie', 'plain=attacker'],
        ['service-proxy-Cookie', 'session=caller'],
      ]);
      expect([integration, response.status]).toEqual([integration, 200]);
      answers.splice(-2);
      const echo = response.json();
      const named = (wanted: string) => (echo.rawHeaders as string[]).filter((_, i) => i % 2 === 1 && (echo.rawHeaders[i - 1] as string).toLowerCase() === wanted);
      // Ours (the Latchkey key, sent unprefixed) never goes; the caller's own goes once.
      expect([integration, named('authorization'), named('cookie')]).toEqual([integration, ['Bearer caller-token'], ['session=caller']]);
      expect(response.text).not.toContain(proxyKey);
    }
  });

  test("case 9: a prefixed Authorization or Cookie follows a redirect only to the provider's own origin", async () => {
    provider.reset();
    foreign.reset();
    const response = await proxy(`/redirect?to=${encodeURIComponent(`${foreign.url}/echo`)}`, 'none', [
      ['service-proxy-Authorization', 'Bearer caller-token'],
      ['service-proxy-Cookie', 'session=caller'],
    ]);
    expect(response.status).toBe(200);
    answers.splice(-2);
    expect(provider.requests[0]!.headers['authorization']).toBe('Bearer caller-token');
    expect(foreign.requests).toHaveLength(1);
    expect(foreign.requests[0]!.headers['authorization']).toBeUndefined();
    expect(foreign.requests[0]!.headers['cookie']).toBeUndefined();
  });

  test("case 9: the caller's Authorization and headers or query parameters named like the injected credential never override it", async () => {
    provider.reset();
    await proxy('/echo', 'api', [['service-proxy-x-api-key', 'attacker'], ['X-API-KEY', 'attacker'], ['service-proxy-X-Api-Key', 'attacker']]);
    answers.splice(-2);
    expect(provider.requests[0]!.headers['x-api-key']).toBe(API_KEY);
    provider.reset();
    await proxy('/echo', 'basic', [['service-proxy-authorization', 'Basic YXR0YWNrZXI6eA=='], ['AUTHORIZATION', 'Basic x']]);
    answers.splice(-2);
    expect(provider.requests[0]!.headers['authorization']).toBe(`Basic ${Buffer.from(`ada:${BASIC_PASSWORD}`).toString('base64')}`);
    // An OAuth 2 bearer token likewise: one Authorization reaches the provider, ours, whatever
    // the letter case or the number of the caller's.
    provider.reset();
    const oauth = await proxy('/echo', 'oauth', [
      ['service-proxy-Authorization', 'Bearer attacker'],
      ['SERVICE-PROXY-AUTHORIZATION', 'Bearer attacker2'],
      ['service-proxy-authorization', 'Basic attacker3'],
    ]);
    expect(oauth.status).toBe(200);
    answers.splice(-2);
    const raw = oauth.json().rawHeaders as string[];
    const authorizations = raw.filter((_, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === 'authorization');
    expect(authorizations).toEqual([`Bearer ${OAUTH_TOKEN}`]);
    // A query credential likewise: the provider sees one api_key, ours.
    provider.reset();
    await proxy('/echo?api_key=attacker&x=1', 'query');
    answers.splice(-2);
    const query = new URL(provider.requests[0]!.url, provider.url).searchParams;
    expect(query.getAll('api_key')).toEqual([QUERY_KEY]);
    expect(query.get('x')).toBe('1');
  });

  test('case 9: hostile function code gets the same header, path and host rules through ctx.proxy', async () => {
    await deployWithCli(join(repoRoot(), 'e2e', 'security', 'proxy-functions'), stack);
    provider.reset();
    foreign.reset();
    const response = await raw('/action/trigger', [
      ['Authorization', `Bearer ${stack.bootstrapKey}`],
      ['Content-Type', 'application/json'],
      ['Connection-Id', 'scoped'],
      ['Provider-Config-Key', 'scoped'],
    ], 'POST', JSON.stringify({ action_name: 'hostile', input: { foreign: foreign.url } }));
    expect(response.status).toBe(200);
    expect(response.json()).toEqual({ headers: { status: 404 }, escape: { error: 'invalid_uri_params' }, foreign: { error: 'upstream_not_allowed' } });
    // One call reached the provider, under its base path, with only the headers it may see.
    expect(provider.requests.map((request) => request.path)).toEqual(['/api/echo']);
    const seen = provider.requests[0]!.headers;
    expect(seen.host).toBe(new URL(provider.url).host);
    expect(seen['x-api-key']).toBe(SCOPED_KEY);
    expect(seen['x-kept']).toBe('kept');
    // Its own Authorization and Cookie go, as the client's do: the injected key stays its own.
    expect([seen['authorization'], seen['cookie']]).toEqual(['Bearer attacker', 'session=attacker']);
    for (const name of ['x-forwarded-for', 'forwarded', 'x-hop-secret', 'proxy-foo']) expect([name, seen[name]]).toEqual([name, undefined]);
    expect(foreign.requests).toHaveLength(0);
  }, 120_000);

  test('case 16: a malformed percent escape in a path is a 400 on every route', async () => {
    provider.reset();
    const auth: Array<[string, string]> = [['Authorization', `Bearer ${stack.bootstrapKey}`]];
    for (const path of ['/connections/a%E0%A4%A?provider_config_key=api', '/integrations/%E0%A4%A', '/providers/%zz', '/no-such-route/%E0']) {
      const response = await raw(path, auth);
      expect([path, response.status, response.json().error.code]).toEqual([path, 400, 'invalid_uri_params']);
    }
    const proxied = await proxy('/echo/a%E0%A4%A', 'api');
    expect(proxied.status).toBe(400);
    expect(proxied.json().error.code).toBe('invalid_uri_params');
    expect(provider.requests).toHaveLength(0);
  });

  test("case 19: dot segments in any encoding cannot leave the provider's base path", async () => {
    provider.reset();
    const attacks = [
      '/../echo',
      '/%2e%2e/echo',
      '/%2e%2E/echo',
      '/.%2e/echo',
      '/..%2fecho',
      '/..%2Fecho',
      '/..\\echo',
      '/%5c..%5cecho',
      '/%252e%252e/echo',
      '/%252e%252e%252fecho',
      '/x/../../echo',
      '/x/%2e%2e/%2e%2e/echo',
    ];
    for (const path of attacks) {
      const response = await proxy(path, 'scoped');
      expect([path, response.status, response.json().error.code]).toEqual([path, 400, 'invalid_uri_params']);
    }
    expect(provider.requests).toHaveLength(0);
    // An encoded slash inside a segment is an ordinary path: it stays under the base path.
    await proxy('/items/group%2Fproject', 'scoped');
    expect(provider.requests.map((request) => request.url)).toEqual(['/api/items/group%2Fproject']);
  });

  test("case 20: a connection config value cannot move the base URL's host", async () => {
    foreign.reset();
    const foreignPort = new URL(foreign.url).port;
    for (const [id, subdomain] of [
      ['sub-1', `127.0.0.1:${foreignPort}/x?`],
      ['sub-2', `127.0.0.1:${foreignPort}#`],
      ['sub-3', `x@127.0.0.1:${foreignPort}/`],
      ['sub-4', `127.0.0.1:${foreignPort}\\`],
    ] as const) {
      // Refused when it is given, naming the key and never the value.
      const refused = await api('POST', '/connections', { provider_config_key: 'subdomain', connection_id: id, connection_config: { subdomain }, credentials: { type: 'API_KEY', apiKey: SUB_KEY } });
      expect([subdomain, refused.status, refused.json.error.code, refused.json.error.errors[0].path]).toEqual([subdomain, 400, 'invalid_body', 'connection_config.subdomain']);
      expect(JSON.stringify(refused.json)).not.toContain(subdomain);
      // And refused by the proxy where such a value was stored before the vault checked it.
      await storedUnchecked('subdomain', id, { subdomain }, { type: 'API_KEY', apiKey: SUB_KEY });
      const response = await proxy('/echo', 'subdomain', [], id);
      expect([subdomain, response.status, response.json().error.code]).toEqual([subdomain, 400, 'upstream_not_allowed']);
      expect(response.text).not.toContain(subdomain);
    }
    expect(foreign.requests).toHaveLength(0);
    expect(foreignSaw()).not.toContain(SUB_KEY);
    expect(foreignSaw()).not.toContain(ENV_SECRET);
  });

  test('case 20: a connection config value in the base path is one encoded segment', async () => {
    provider.reset();
    const dotsGiven = await api('POST', '/connections', { provider_config_key: 'store', connection_id: 'dots', connection_config: { store: '..' }, credentials: { type: 'API_KEY', apiKey: STORE_KEY } });
    expect([dotsGiven.status, dotsGiven.json.error.code]).toEqual([400, 'invalid_body']);
    await storedUnchecked('store', 'dots', { store: '..' }, { type: 'API_KEY', apiKey: STORE_KEY });
    const dots = await proxy('/echo', 'store', [], 'dots');
    expect(dots.status).toBe(400);
    expect(dots.json().error.code).toBe('upstream_not_allowed');
    expect(provider.requests).toHaveLength(0);

    await created('/connections', { provider_config_key: 'store', connection_id: 'escape', connection_config: { store: '../../echo?x=' }, credentials: { type: 'API_KEY', apiKey: STORE_KEY } });
    const escape = await proxy('/items', 'store', [], 'escape');
    expect(escape.status).toBe(404);
    expect(provider.requests.map((request) => request.url)).toEqual(['/stores/..%2F..%2Fecho%3Fx%3D/items']);
  });
});
