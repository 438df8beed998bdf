import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import jwt from 'jsonwebtoken';
import { createBus } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

/**
 * Refresh on fetch for the token types other than OAuth 2: JWT (signed by the vault), APP (an
 * installation token bought with an app JWT) and TWO_STEP / BILL / SIGNATURE (a token bought
 * with the connection's credentials as the provider entry's `token_request` describes), each
 * against a real HTTP server on loopback.
 */

let stack: Stack;
let credentialsKey: string;
let provider: LoopbackProvider;

const MINUTE = 60_000;
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = (key: typeof rsa.privateKey, type: 'pkcs8' | 'spki') => key.export({ type, format: 'pem' }).toString();
const appKeys = generateKeyPairSync('rsa', { modulusLength: 2048 });
const APP_ID = '424242';

const api = (method: string, path: string, body?: unknown, token = stack.bootstrapKey) =>
  http(`${stack.url}${path}`, { method, token, ...(body === undefined ? {} : { body }) });
const fetchConnection = (connectionId: string, integration: string, query = '') =>
  api('GET', `/connections/${connectionId}?provider_config_key=${integration}${query}`, undefined, credentialsKey);

async function importConnection(integration: string, connectionId: string, credentials: Record<string, unknown>, connectionConfig?: Record<string, unknown>) {
  const created = await api('POST', '/connections', {
    provider_config_key: integration,
    connection_id: connectionId,
    credentials,
    ...(connectionConfig ? { connection_config: connectionConfig } : {}),
  });
  expect(created.status).toBe(201);
}

/** Milliseconds from now until an ISO timestamp. */
const untilIso = (iso: string) => Date.parse(iso) - Date.now();

// ---- the loopback provider

interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

interface LoopbackProvider {
  url: string;
  /** Requests by route name, oldest first. */
  seen: Record<'app' | 'two-step' | 'bill' | 'signature', SeenRequest[]>;
  issued: Set<string>;
  /** The next token request (installation, login or signature) is answered this status instead; calls queue up. */
  failNext(status: number): void;
  close(): Promise<void>;
}

const USERS = { ada: 'correct horse battery staple' };
const BILL = { dev_key: 'dev-key-0123456789', organization_id: 'org-00801' };

function answer(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

/**
 * One server playing four providers: a GitHub-App-like installation token endpoint that checks
 * the app JWT with the app's public key, and three login endpoints that check the credentials
 * they are sent and answer a token with its lifetime, each in its own shape.
 */
async function startLoopbackProvider(): Promise<LoopbackProvider> {
  const seen: LoopbackProvider['seen'] = { app: [], 'two-step': [], bill: [], signature: [] };
  const issued = new Set<string>();
  const failures: number[] = [];
  const mint = (prefix: string) => {
    const token = `${prefix}_${randomBytes(12).toString('hex')}`;
    issued.add(token);
    return token;
  };

  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = new URL(request.url ?? '/', 'http://loopback');
      const record = (route: keyof typeof seen) => seen[route].push({ method: request.method ?? '', path: url.pathname, headers: request.headers, body });
      /** The status of a failure queued by `failNext`, to answer this token request with. */
      const failure = () => failures.shift();

      const installation = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(url.pathname);
      if (installation && request.method === 'POST') {
        record('app');
        const failed = failure();
        if (failed !== undefined) return answer(response, failed, { error: 'temporarily_unavailable' });
        const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
        try {
          const claims = jwt.verify(bearer ?? '', pem(appKeys.publicKey, 'spki'), { algorithms: ['RS256'], issuer: APP_ID });
          if (typeof claims === 'string') throw new Error('claims expected');
        } catch (error) {
          return answer(response, 401, { message: `A JSON web token could not be decoded: ${(error as Error).message}` });
        }
        if (installation[1] !== '77') return answer(response, 404, { message: 'Not Found' });
        return answer(response, 201, { token: mint('ghs'), expires_at: new Date(Date.now() + 60 * MINUTE).toISOString(), permissions: { contents: 'read' } });
      }

      // The two-step provider's API: it takes only the tokens it issued.
      if (url.pathname === '/two-step/api/me' && request.method === 'GET') {
        const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
        return bearer !== undefined && issued.has(bearer) ? answer(response, 200, { user: 'ada' }) : answer(response, 401, { error: 'invalid_token' });
      }

      const tenant = /^\/two-step\/([^/]+)\/login$/.exec(url.pathname);
      if (tenant && request.method === 'POST') {
        record('two-step');
        const failed = failure();
        if (failed !== undefined) return answer(response, failed, { error: 'temporarily_unavailable' });
        const { user, pass } = JSON.parse(body) as { user?: string; pass?: string };
        if (request.headers['x-tenant'] !== tenant[1] || !user || USERS[user as keyof typeof USERS] !== pass) {
          return answer(response, 401, { error: 'invalid_credentials', error_description: 'unknown user or wrong password' });
        }
        return answer(response, 200, { data: { token: mint('two'), expires_in: 3600 } });
      }

      if (url.pathname === '/bill/api/v2/Login.json' && request.method === 'POST') {
        record('bill');
        const failed = failure();
        if (failed !== undefined) return answer(response, failed, { error: 'temporarily_unavailable' });
        const form = new URLSearchParams(body);
        const ok =
          request.headers['content-type']?.startsWith('application/x-www-form-urlencoded') &&
          USERS[form.get('userName') as keyof typeof USERS] === form.get('password') &&
          form.get('orgId') === BILL.organization_id &&
          form.get('devKey') === BILL.dev_key;
        if (!ok) return answer(response, 401, { response_status: 1, response_message: 'Error', response_data: { error_code: 'BDC_1102', error_message: 'Invalid username or password' } });
        return answer(response, 200, { response_status: 0, response_message: 'Success', response_data: { sessionId: mint('bill'), orgId: BILL.organization_id, usersId: 'usr-1' } });
      }

      if (url.pathname === '/signature/token' && request.method === 'GET') {
        record('signature');
        const failed = failure();
        if (failed !== undefined) return answer(response, failed, { error: 'temporarily_unavailable' });
        const user = request.headers['x-wsse-user'];
        if (typeof user !== 'string' || USERS[user as keyof typeof USERS] !== request.headers['x-wsse-secret']) {
          return answer(response, 401, { code: 'E_AUTH', message: 'Authentication failed' });
        }
        return answer(response, 200, { token: mint('sig'), expires_in: '1800' });
      }

      answer(response, 404, { message: 'no such route' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    issued,
    failNext: (status) => void failures.push(status),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function providersYaml(base: string): string {
  return `
loopback-jwt:
  display_name: Loopback JWT
  categories: [test]
  auth_mode: JWT
loopback-ghost:
  display_name: Loopback Ghost Admin
  categories: [test]
  auth_mode: JWT
  jwt:
    audience: /admin/
    lifetime_seconds: 300
loopback-app:
  display_name: Loopback GitHub App
  categories: [test]
  auth_mode: APP
  token_url: ${base}/app/installations/\${connectionConfig.installation_id}/access_tokens
  connection_configuration: [installation_id]
loopback-two-step:
  display_name: Loopback two-step
  categories: [test]
  auth_mode: TWO_STEP
  connection_configuration: [tenant]
  proxy:
    base_url: ${base}/two-step/api
  token_request:
    url: ${base}/two-step/\${connectionConfig.tenant}/login
    body_format: json
    body:
      user: \${credentials.username}
      pass: \${credentials.password}
    headers:
      X-Tenant: \${connectionConfig.tenant}
    token_path: data.token
    expires_in_path: data.expires_in
loopback-bill:
  display_name: Loopback Bill
  categories: [test]
  auth_mode: BILL
  token_request:
    url: ${base}/bill/api/v2/Login.json
    body_format: form
    body:
      userName: \${credentials.username}
      password: \${credentials.password}
      orgId: \${credentials.organization_id}
      devKey: \${credentials.dev_key}
    token_path: response_data.sessionId
    expires_in_seconds: 2100
loopback-signature:
  display_name: Loopback signature
  categories: [test]
  auth_mode: SIGNATURE
  token_request:
    method: GET
    url: ${base}/signature/token
    headers:
      X-WSSE-User: \${username}
      X-WSSE-Secret: \${password}
    token_path: token
    expires_in_path: expires_in
`;
}

beforeAll(async () => {
  provider = await startLoopbackProvider();
  const providersFile = writeProvidersFile(providersYaml(provider.url));
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  const created = await http(`${stack.url}/admin/environments/dev/api-keys`, {
    method: 'POST',
    token: stack.adminToken,
    body: { display_name: 'credentials reader', scopes: ['environment:connections:read_credentials'] },
  });
  credentialsKey = created.json.data.secret as string;
  for (const [name, extra] of [
    ['jwt', {}],
    ['ghost', {}],
    ['app', { credentials: { app_id: APP_ID, private_key: pem(appKeys.privateKey, 'pkcs8') } }],
    ['two-step', {}],
    ['bill', {}],
    ['signature', {}],
  ] as const) {
    expect((await api('POST', '/integrations', { provider: `loopback-${name}`, unique_key: name, ...extra })).status).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await provider?.close();
});

describe('JWT connections', () => {
  /** Fetch, second fetch, forced fetch: a token made on first fetch, kept inside the window, new when forced. */
  async function checkLifecycle(connectionId: string, verifyKey: string | Buffer, algorithm: jwt.Algorithm, kid: string) {
    const first = await fetchConnection(connectionId, 'jwt');
    expect(first.status).toBe(200);
    const { token, expires_at } = first.json.credentials as { token: string; expires_at: string };
    const decoded = jwt.verify(token, verifyKey, { algorithms: [algorithm], complete: true });
    expect(decoded.header).toMatchObject({ alg: algorithm, kid });
    expect(decoded.payload).toMatchObject({ iss: 'issuer-7' });
    expect(untilIso(expires_at)).toBeGreaterThan(19 * MINUTE);
    expect(untilIso(expires_at)).toBeLessThanOrEqual(20 * MINUTE);
    expect((decoded.payload as jwt.JwtPayload).exp).toBe(Date.parse(expires_at) / 1000);

    expect((await fetchConnection(connectionId, 'jwt')).json.credentials.token).toBe(token);

    // A JWT's timestamps have one-second resolution: let a second pass so a new token differs.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const forced = await fetchConnection(connectionId, 'jwt', '&force_refresh=true');
    expect(forced.status).toBe(200);
    expect(forced.json.credentials.token).not.toBe(token);
    jwt.verify(forced.json.credentials.token, verifyKey, { algorithms: [algorithm] });
    expect((await fetchConnection(connectionId, 'jwt')).json.credentials.token).toBe(forced.json.credentials.token);
  }

  it('sign RS256 with an RSA private key, carrying iss and kid', async () => {
    await importConnection('jwt', 'jwt-rsa', { type: 'JWT', privateKey: pem(rsa.privateKey, 'pkcs8'), issuerId: 'issuer-7', privateKeyId: 'key-rsa-1' });
    await checkLifecycle('jwt-rsa', pem(rsa.publicKey, 'spki'), 'RS256', 'key-rsa-1');
  });

  it('sign ES256 with a PKCS#8 P-256 key (an App Store Connect .p8 key)', async () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    await importConnection('jwt', 'jwt-ec', { type: 'JWT', privateKey: pem(ec.privateKey, 'pkcs8'), issuerId: 'issuer-7', privateKeyId: 'key-ec-1' });
    await checkLifecycle('jwt-ec', pem(ec.publicKey, 'spki'), 'ES256', 'key-ec-1');
  });

  it('sign HS256 with an {id, secret} key, the id as kid', async () => {
    const secret = randomBytes(32).toString('hex');
    await importConnection('jwt', 'jwt-hs', { type: 'JWT', privateKey: { id: 'admin-key-1', secret }, issuerId: 'issuer-7' });
    await checkLifecycle('jwt-hs', Buffer.from(secret, 'hex'), 'HS256', 'admin-key-1');
  });

  // Ghost's Admin API takes a token only with `aud: /admin/` that lives five minutes at most;
  // App Store Connect's wants `aud: appstoreconnect-v1`.
  it('carry the audience and lifetime the provider entry names, and keep a short one for the first half of its life', async () => {
    const secret = randomBytes(32).toString('hex');
    await importConnection('ghost', 'ghost-1', { type: 'JWT', privateKey: { id: 'admin-key-2', secret } });
    const first = await fetchConnection('ghost-1', 'ghost');
    expect(first.status).toBe(200);
    const { token } = first.json.credentials as { token: string };
    const payload = jwt.verify(token, Buffer.from(secret, 'hex'), { algorithms: ['HS256'], audience: '/admin/' }) as jwt.JwtPayload;
    expect(payload.exp! - payload.iat!).toBe(300);
    // Its refresh window is the second half of its five minutes, not the fifteen of longer tokens.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await fetchConnection('ghost-1', 'ghost')).json.credentials.token).toBe(token);
  });

  it('answer 424 when the private key cannot sign', async () => {
    await importConnection('jwt', 'jwt-bad', { type: 'JWT', privateKey: 'not a PEM key' });
    const failed = await fetchConnection('jwt-bad', 'jwt');
    expect(failed.status).toBe(424);
    expect(failed.json.error).toMatchObject({ code: 'refresh_token_external_error', payload: { error: 'invalid_private_key' } });
    await importConnection('jwt', 'jwt-bad-secret', { type: 'JWT', privateKey: { id: 'k', secret: 'not hex' } });
    expect((await fetchConnection('jwt-bad-secret', 'jwt')).json.error).toMatchObject({ code: 'refresh_token_external_error', payload: { error: 'invalid_private_key' } });
  });
});

describe('APP connections', () => {
  it('buy an installation token with an app JWT inside the window, and keep it otherwise', async () => {
    await importConnection('app', 'app-1', { type: 'APP', access_token: 'ghs_imported_old', expires_at: new Date(Date.now() + MINUTE).toISOString(), raw: {} }, { installation_id: '77' });
    const before = provider.seen.app.length;
    const first = await fetchConnection('app-1', 'app');
    expect(first.status).toBe(200);
    const { access_token, expires_at, raw } = first.json.credentials as { access_token: string; expires_at: string; raw: Record<string, unknown> };
    expect(provider.issued.has(access_token)).toBe(true);
    expect(untilIso(expires_at)).toBeGreaterThan(55 * MINUTE);
    expect(raw).toMatchObject({ token: access_token, permissions: { contents: 'read' } });
    expect(provider.seen.app.slice(before).map((request) => request.path)).toEqual(['/app/installations/77/access_tokens']);

    expect((await fetchConnection('app-1', 'app')).json.credentials.access_token).toBe(access_token);
    expect(provider.seen.app.length).toBe(before + 1);
  });

  it('cannot be made by an end user, who would pick the installation the app buys tokens for: no form at the gateway, nor at the vault', async () => {
    const session = (await api('POST', '/connect/sessions', {})).json.data.token as string;
    const before = provider.seen.app.length;
    const credentials = { access_token: 'ghs_typed_in', expires_at: '2000-01-01T00:00:00Z', raw: {} };
    const refused = await http(`${stack.url}/auth/app/app?connect_session_token=${session}`, { method: 'POST', body: { ...credentials, connection_config: { installation_id: '77' } } });
    expect([refused.status, refused.json.error.code]).toEqual([400, 'invalid_uri_params']);
    // The vault, which owns connections, refuses it itself when asked as the gateway asks.
    const bus = await createBus({ servers: stack.nats.url, service: 'app-form-test', identity: stack.nats.credentials('gateway'), logger: createLogger({ service: 'test', silent: true }), requestTimeoutMs: 5000 });
    try {
      const asked = bus.request(vaultContracts.connectWithSession, { token: session, integration: 'app', credentials: { type: 'APP', ...credentials }, connection_config: { installation_id: '77' } });
      await expect(asked).rejects.toMatchObject({ code: 'invalid_body' });
    } finally {
      await bus.drain();
    }
    const made = (await api('GET', '/connections?integrationId=app')).json.connections as Array<{ connection_id: string }>;
    expect(made.filter((connection) => !connection.connection_id.startsWith('app-'))).toEqual([]);
    expect(provider.seen.app.length).toBe(before);
  });

  it('get a new token on force_refresh=true', async () => {
    await importConnection('app', 'app-2', { type: 'APP', access_token: 'ghs_imported_long_lived', expires_at: new Date(Date.now() + 60 * MINUTE).toISOString(), raw: {} }, { installation_id: '77' });
    expect((await fetchConnection('app-2', 'app')).json.credentials.access_token).toBe('ghs_imported_long_lived');
    const forced = await fetchConnection('app-2', 'app', '&force_refresh=true');
    expect(forced.status).toBe(200);
    expect(provider.issued.has(forced.json.credentials.access_token)).toBe(true);
  });

  // Fails until refresher.ts ensureFresh forces with shouldForce(type, { force, vendorJwt })
  // (refresh-policy.ts); once it does, this turns red: make it a plain it().
  it('get a new token on refresh_vendor_app_jwt_token=true', async () => {
    await importConnection('app', 'app-3', { type: 'APP', access_token: 'ghs_imported_long_lived', expires_at: new Date(Date.now() + 60 * MINUTE).toISOString(), raw: {} }, { installation_id: '77' });
    expect((await fetchConnection('app-3', 'app')).json.credentials.access_token).toBe('ghs_imported_long_lived');
    const vendor = await fetchConnection('app-3', 'app', '&refresh_vendor_app_jwt_token=true');
    expect(vendor.status).toBe(200);
    expect(provider.issued.has(vendor.json.credentials.access_token)).toBe(true);
    const again = await fetchConnection('app-3', 'app', '&refresh_vendor_app_jwt_token=true');
    expect(again.json.credentials.access_token).not.toBe(vendor.json.credentials.access_token);
  });

  it('hand out the token in hand, with no auth error, when the installation token endpoint fails for now (503) near its expiry', async () => {
    await importConnection('app', 'app-provider-down', { type: 'APP', access_token: 'ghs_in_hand', expires_at: new Date(Date.now() + 5 * MINUTE).toISOString(), raw: {} }, { installation_id: '77' });
    const before = provider.seen.app.length;
    provider.failNext(503);
    const read = await fetchConnection('app-provider-down', 'app');
    expect(read.status).toBe(200);
    expect(read.json.credentials.access_token).toBe('ghs_in_hand');
    expect(read.json.errors).toEqual([]);
    expect(provider.seen.app.length).toBe(before + 1);
  });

  it('answer 424 with the provider status when the installation is unknown', async () => {
    await importConnection('app', 'app-gone', { type: 'APP', access_token: 'ghs_for_a_removed_install', expires_at: new Date(Date.now() + MINUTE).toISOString(), raw: {} }, { installation_id: '404' });
    const failed = await fetchConnection('app-gone', 'app');
    expect(failed.status).toBe(424);
    expect(failed.json.error).toMatchObject({ code: 'refresh_token_external_error', payload: { status: 404 } });
  });
});

describe('a token-request token the provider refuses', () => {
  // One kept until its provider refuses it (its answer stated no lifetime, or the provider
  // revoked it): the proxy asks the vault for a new one and sends the call again, as for OAuth.
  it('is bought again by the proxy after a 401, and the call sent again with it', async () => {
    await importConnection('two-step', 'two-step-revoked', { type: 'TWO_STEP', raw: { username: 'ada', password: USERS.ada }, token: 'never-issued', expires_at: new Date(Date.now() + 120 * MINUTE).toISOString() }, { tenant: 'acme' });
    const called = await fetch(`${stack.url}/proxy/me`, { headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'two-step-revoked', 'provider-config-key': 'two-step' } });
    expect(called.status).toBe(200);
    expect(await called.json()).toEqual({ user: 'ada' });
    expect(provider.issued.has(String((await fetchConnection('two-step-revoked', 'two-step')).json.credentials.token))).toBe(true);
  });
});

describe('token-request types (TWO_STEP, BILL, SIGNATURE)', () => {
  const password = USERS.ada;
  const cases = [
    {
      type: 'TWO_STEP',
      integration: 'two-step',
      route: 'two-step',
      config: { tenant: 'acme' },
      credentials: (pass: string) => ({ type: 'TWO_STEP', raw: { username: 'ada', password: pass } }),
      tokenOf: (credentials: Record<string, unknown>) => credentials['token'],
      lifetimeMs: 60 * MINUTE,
      /** What the provider must have been sent. */
      checkRequest: (request: SeenRequest) => {
        expect(request).toMatchObject({ method: 'POST', path: '/two-step/acme/login' });
        expect(request.headers['x-tenant']).toBe('acme');
        expect(request.headers['content-type']).toMatch(/^application\/json/);
        expect(JSON.parse(request.body)).toEqual({ user: 'ada', pass: password });
      },
      checkCredentials: (credentials: Record<string, unknown>) => {
        // raw keeps the fields the next token request reads.
        expect(credentials['raw']).toEqual({ username: 'ada', password });
      },
      refusal: { status: 401, error: 'invalid_credentials', message: 'unknown user or wrong password' },
    },
    {
      type: 'BILL',
      integration: 'bill',
      route: 'bill',
      config: undefined,
      credentials: (pass: string) => ({ type: 'BILL', ...BILL, username: 'ada', password: pass, raw: {} }),
      tokenOf: (credentials: Record<string, unknown>) => credentials['session_id'],
      lifetimeMs: 35 * MINUTE,
      checkRequest: (request: SeenRequest) => {
        expect(request).toMatchObject({ method: 'POST', path: '/bill/api/v2/Login.json' });
        expect(Object.fromEntries(new URLSearchParams(request.body))).toEqual({ userName: 'ada', password, orgId: BILL.organization_id, devKey: BILL.dev_key });
      },
      checkCredentials: (credentials: Record<string, unknown>) => {
        expect(credentials).toMatchObject({ ...BILL, username: 'ada', password });
        expect(credentials['raw']).toMatchObject({ response_status: 0, response_data: { sessionId: credentials['session_id'] } });
      },
      refusal: { status: 401, error: 'BDC_1102', message: 'Invalid username or password' },
    },
    {
      type: 'SIGNATURE',
      integration: 'signature',
      route: 'signature',
      config: undefined,
      credentials: (pass: string) => ({ type: 'SIGNATURE', username: 'ada', password: pass }),
      tokenOf: (credentials: Record<string, unknown>) => credentials['token'],
      lifetimeMs: 30 * MINUTE,
      checkRequest: (request: SeenRequest) => {
        expect(request).toMatchObject({ method: 'GET', path: '/signature/token', body: '' });
        expect(request.headers['x-wsse-user']).toBe('ada');
        expect(request.headers['x-wsse-secret']).toBe(password);
      },
      checkCredentials: (credentials: Record<string, unknown>) => {
        expect(credentials).toMatchObject({ username: 'ada', password });
      },
      refusal: { status: 401, error: 'E_AUTH', message: 'Authentication failed' },
    },
  ] as const;

  describe.each(cases)('$type', (item) => {
    const seen = () => provider.seen[item.route];

    it('gets a token on first fetch, sending the credentials as the provider entry says, and keeps it inside the window', async () => {
      await importConnection(item.integration, `${item.route}-1`, item.credentials(password), item.config);
      const before = seen().length;
      const first = await fetchConnection(`${item.route}-1`, item.integration);
      expect(first.status).toBe(200);
      const credentials = first.json.credentials as Record<string, unknown>;
      expect(credentials['type']).toBe(item.type);
      const token = item.tokenOf(credentials);
      expect(provider.issued.has(String(token))).toBe(true);
      expect(Math.abs(untilIso(String(credentials['expires_at'])) - item.lifetimeMs)).toBeLessThan(MINUTE);
      item.checkCredentials(credentials);
      expect(seen().length).toBe(before + 1);
      item.checkRequest(seen().at(-1)!);

      expect(item.tokenOf((await fetchConnection(`${item.route}-1`, item.integration)).json.credentials)).toBe(token);
      expect(seen().length).toBe(before + 1);

      const forced = await fetchConnection(`${item.route}-1`, item.integration, '&force_refresh=true');
      expect(forced.status).toBe(200);
      expect(item.tokenOf(forced.json.credentials)).not.toBe(token);
      expect(provider.issued.has(String(item.tokenOf(forced.json.credentials)))).toBe(true);
      // The next token request still finds what it needs.
      item.checkRequest(seen().at(-1)!);
    });

    it('renews a token that expires within 15 minutes', async () => {
      const imported = { ...item.credentials(password), ...(item.type === 'BILL' ? { session_id: 'imported-session' } : { token: 'imported-token' }) };
      await importConnection(item.integration, `${item.route}-2`, { ...imported, expires_at: new Date(Date.now() + 5 * MINUTE).toISOString() }, item.config);
      const read = await fetchConnection(`${item.route}-2`, item.integration);
      expect(read.status).toBe(200);
      expect(provider.issued.has(String(item.tokenOf(read.json.credentials)))).toBe(true);
      expect(untilIso(String(read.json.credentials.expires_at))).toBeGreaterThan(15 * MINUTE);
    });

    it('hands out the token in hand, with no auth error, when the token request fails for now (503) near its expiry', async () => {
      const inHand = { ...item.credentials(password), ...(item.type === 'BILL' ? { session_id: 'session-in-hand' } : { token: 'token-in-hand' }) };
      await importConnection(item.integration, `${item.route}-provider-down`, { ...inHand, expires_at: new Date(Date.now() + 5 * MINUTE).toISOString() }, item.config);
      const before = seen().length;
      provider.failNext(503);
      const read = await fetchConnection(`${item.route}-provider-down`, item.integration);
      expect(read.status).toBe(200);
      expect(item.tokenOf(read.json.credentials)).toBe(item.type === 'BILL' ? 'session-in-hand' : 'token-in-hand');
      expect(read.json.errors).toEqual([]);
      expect(seen().length).toBe(before + 1);
    });

    it('answers 424 refresh_token_external_error with the provider status and error, never the credentials', async () => {
      const wrong = `wrong-${randomBytes(6).toString('hex')}`;
      await importConnection(item.integration, `${item.route}-refused`, item.credentials(wrong), item.config);
      const failed = await fetchConnection(`${item.route}-refused`, item.integration);
      expect(failed.status).toBe(424);
      expect(failed.json.error).toMatchObject({ code: 'refresh_token_external_error', payload: item.refusal });
      expect(JSON.stringify(failed.json)).not.toContain(wrong);
      const listed = (await api('GET', `/connections?connectionId=${item.route}-refused`)).json.connections[0];
      expect(listed.errors).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
    });
  });
});
