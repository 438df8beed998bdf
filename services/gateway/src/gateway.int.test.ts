import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import mongoose from 'mongoose';
import { createBus, type Bus } from '@latchkey/bus';
import { parseConfig } from '@latchkey/config';
import { STREAMS, gatewayContracts, webhookContracts, type InboundWebhook } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startGateway } from './start-gateway.js';

const ADMIN_TOKEN = 'admin-token-for-tests-0123456789abcdef';
const BOOTSTRAP_SECRET_KEY = 'lk_sk_bootstrap-secret-for-tests-0123456789';
const SETTINGS_KEYS = `v1:${randomBytes(32).toString('base64')}`;
const DB_NAME = uniqueDbName('gateway');

let nats: TestNats;
let mongo: TestMongo;
let gateway: RunningService<{ port: number }>;
let base: string;
let bus: Bus;

async function call(method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  }
  const response = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? (JSON.parse(text) as any) : undefined };
}

/**
 * A POST that declares a `length`-byte body and sends `sent` bytes of it (none by default), then
 * nothing more: `answer` is what the gateway says without waiting for the rest (or never
 * settles, while the gateway waits); `abort` drops it.
 */
async function startUpload(path: string, length: number, sent = 0) {
  const request = httpRequest(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'text/plain', 'content-length': String(length) } });
  request.on('error', () => undefined);
  if (sent > 0) request.write('x'.repeat(sent));
  else request.flushHeaders();
  const answer = new Promise<{ status: number; code?: string }>((resolve) => {
    request.once('response', (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.once('end', () => resolve({ status: response.statusCode ?? 0, code: text ? JSON.parse(text).error?.code : undefined }));
    });
  });
  return { answer, abort: () => request.destroy() };
}

const admin = (method: string, path: string, body?: unknown) =>
  call(method, `/admin${path}`, { token: ADMIN_TOKEN, ...(body === undefined ? {} : { body }) });

async function createKey(environment: string, scopes: unknown, displayName = 'test key') {
  const created = await admin('POST', `/environments/${environment}/api-keys`, { display_name: displayName, scopes });
  expect(created.status).toBe(201);
  return created.json.data as { id: string; secret: string };
}

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  const config = parseConfig(configSchema, {
    NATS_URL: nats.url,
    NATS_PASSWORD: nats.credentials('gateway').password,
    MONGODB_URI: mongo.uri,
    MONGODB_DB: DB_NAME,
    PORT: '0',
    METRICS_PORT: '0',
    LOG_LEVEL: 'error',
    ADMIN_TOKEN,
    API_KEY_DIGEST_SECRET: 'digest-secret-for-tests-0123456789abcdef',
    SETTINGS_ENCRYPTION_KEYS: SETTINGS_KEYS,
    BOOTSTRAP_SECRET_KEY,
    MAX_BODY_BYTES: '2048',
    MAX_JSON_BODY_BYTES: '1024',
    WEBHOOK_INGEST_BYTES_PER_MINUTE: String(1024 * 1024),
    WEBHOOK_BODIES_HELD_BYTES: '5000',
  });
  gateway = await runService({ service: 'gateway', config, start: startGateway, handleSignals: false });
  base = `http://127.0.0.1:${gateway.started.port}`;
  // The test asks what other services ask the gateway: as the test server's observer, with the
  // services' 5 s deadline (the gateway's answers read its database: 2 s was a bet on a loaded machine).
  bus = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 5_000 });
});

afterAll(async () => {
  await bus?.drain();
  await gateway?.shutdown();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

describe('API keys', () => {
  it('refuse a request without Authorization with missing_auth_header', async () => {
    const response = await call('GET', '/environment-variables');
    expect(response.status).toBe(401);
    expect(response.json.error.code).toBe('missing_auth_header');
  });

  it('refuse a header that is not Bearer with malformed_auth_header', async () => {
    for (const value of ['Basic abc', 'Bearer', 'bearer x y']) {
      const response = await call('GET', '/environment-variables', { headers: { authorization: value } });
      expect(response.status).toBe(401);
      expect(response.json.error.code).toBe('malformed_auth_header');
    }
  });

  it('refuse an unknown key with unknown_api_key', async () => {
    const response = await call('GET', '/environment-variables', { token: 'lk_sk_not-a-real-key' });
    expect(response.status).toBe(401);
    expect(response.json.error.code).toBe('unknown_api_key');
  });

  it('accept the bootstrap key, which has full access', async () => {
    const response = await call('GET', '/environment-variables', { token: BOOTSTRAP_SECRET_KEY });
    expect(response.status).toBe(200);
    expect(response.json).toEqual([]);
    expect(response.headers.get('x-request-id')).toBeTruthy();
  });

  it('refuse a revoked key with unknown_api_key', async () => {
    const key = await createKey('dev', 'full_access');
    expect((await call('GET', '/environment-variables', { token: key.secret })).status).toBe(200);
    expect((await admin('DELETE', `/environments/dev/api-keys/${key.id}`)).json).toEqual({ success: true });
    const response = await call('GET', '/environment-variables', { token: key.secret });
    expect(response.status).toBe(401);
    expect(response.json.error.code).toBe('unknown_api_key');
  });

  it('need the route scope: 403 forbidden naming it, 200 with it', async () => {
    const without = await createKey('dev', ['environment:proxy']);
    const refused = await call('GET', '/environment-variables', { token: without.secret });
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('forbidden');
    expect(refused.json.error.message).toContain('environment:variables:read');

    const withScope = await createKey('dev', ['environment:variables:read']);
    expect((await call('GET', '/environment-variables', { token: withScope.secret })).status).toBe(200);
  });

  it('see only their own environment', async () => {
    await admin('POST', '/environments', { name: 'env-a' });
    await admin('POST', '/environments', { name: 'env-b', account: 'other' });
    await admin('PATCH', '/environments/env-a', { variables: [{ name: 'ONLY_A', value: 'a' }] });
    await admin('PATCH', '/environments/env-b', { variables: [{ name: 'ONLY_B', value: 'b' }] });
    const keyA = await createKey('env-a', 'full_access');
    const keyB = await createKey('env-b', 'full_access');
    expect((await call('GET', '/environment-variables', { token: keyA.secret })).json).toEqual([{ name: 'ONLY_A', value: 'a' }]);
    expect((await call('GET', '/environment-variables', { token: keyB.secret })).json).toEqual([{ name: 'ONLY_B', value: 'b' }]);
    // A key of env-a cannot be managed through env-b.
    expect((await admin('DELETE', `/environments/env-b/api-keys/${keyA.id}`)).status).toBe(404);
  });

  it('carry rate-limit headers on every authenticated response', async () => {
    const response = await call('GET', '/environment-variables', { token: BOOTSTRAP_SECRET_KEY });
    expect(response.headers.get('x-ratelimit-limit')).toBe('6000');
    expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeLessThan(6000);
    expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
  });

  it('hold JSON bodies to MAX_JSON_BODY_BYTES (1 KiB here), and only the routes that carry code to MAX_BODY_BYTES (2 KiB)', async () => {
    const padded = { provider: 'github', unique_key: 'padded', display_name: 'x'.repeat(1200) };
    const plain = await call('POST', '/integrations', { token: BOOTSTRAP_SECRET_KEY, body: padded });
    expect([plain.status, plain.json.error.code]).toEqual([413, 'payload_too_large']);
    // The same size reaches a code route's own checks (its fields are wrong: 400, not 413).
    const code = await call('POST', '/functions/compile', { token: BOOTSTRAP_SECRET_KEY, body: { pad: 'x'.repeat(1200) } });
    expect([code.status, code.json.error.code]).toEqual([400, 'invalid_body']);
  });
});

describe('operator API', () => {
  it('needs the admin token', async () => {
    expect((await call('GET', '/admin/environments')).json.error.code).toBe('missing_auth_header');
    const wrong = await call('GET', '/admin/environments', { token: BOOTSTRAP_SECRET_KEY });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe('unknown_admin_token');
  });

  it('shows a key secret once, then lists keys with last_used_at and no secret', async () => {
    const key = await createKey('dev', ['environment:variables:read'], 'shown once');
    expect(key.secret).toMatch(/^lk_sk_[A-Za-z0-9_-]{43}$/);

    let listed = (await admin('GET', '/environments/dev/api-keys')).json.data.find((item: { id: string }) => item.id === key.id);
    expect(listed).toMatchObject({ display_name: 'shown once', scopes: ['environment:variables:read'], last_used_at: null });
    expect(JSON.stringify(listed)).not.toContain(key.secret);
    expect(listed.secret).toBeUndefined();

    await call('GET', '/environment-variables', { token: key.secret });
    listed = (await admin('GET', '/environments/dev/api-keys')).json.data.find((item: { id: string }) => item.id === key.id);
    expect(Date.parse(listed.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('lists the bootstrap key as Default - Full access', async () => {
    const keys = (await admin('GET', '/environments/dev/api-keys')).json.data;
    expect(keys[0]).toMatchObject({ display_name: 'Default - Full access', scopes: 'full_access' });
  });

  it('creates environments once and validates input', async () => {
    const created = await admin('POST', '/environments', { name: 'staging' });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ name: 'staging', webhook_url: null, variables: [] });
    expect(created.json.data.webhook_signing_key).toMatch(/^whsec_/);
    expect((await admin('POST', '/environments', { name: 'staging' })).json.error.code).toBe('duplicate_environment');
    const invalid = await admin('POST', '/environments', { name: 'Bad Name!', extra: 1 });
    expect(invalid.status).toBe(400);
    expect(invalid.json.error.code).toBe('invalid_body');
    expect(invalid.json.error.errors.map((item: { path: string }) => item.path).sort()).toEqual(['', 'name']);
  });

  it('updates webhook settings and variables, and rotates the signing key', async () => {
    await admin('POST', '/environments', { name: 'settings' });
    const updated = await admin('PATCH', '/environments/settings', {
      webhook_url: 'https://example.test/hooks',
      send_auth_webhooks: true,
      variables: [{ name: 'API_BASE', value: 'https://api.example.test' }],
    });
    expect(updated.status).toBe(200);
    expect(updated.json.data).toMatchObject({ webhook_url: 'https://example.test/hooks', send_auth_webhooks: true, webhook_url_secondary: null });
    expect((await admin('PATCH', '/environments/settings', { webhook_url: 'ftp://x' })).status).toBe(400);
    expect((await admin('PATCH', '/environments/nope', { send_auth_webhooks: true })).json.error.code).toBe('unknown_environment');

    const rotated = await admin('POST', '/environments/settings/webhook-signing-key/rotate');
    expect(rotated.json.data.signing_key).toMatch(/^whsec_/);
  });

  it('refuses unknown keys inside a variable, as in the body itself, and changes nothing', async () => {
    await admin('POST', '/environments', { name: 'strict-variables' });
    const refused = await admin('PATCH', '/environments/strict-variables', { variables: [{ name: 'A', value: 'x', secret: true }] });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('invalid_body');
    expect(refused.json.error.errors.map((item: { path: string }) => item.path)).toEqual(['variables.0']);
    expect((await admin('GET', '/environments')).json.data.find((item: { name: string }) => item.name === 'strict-variables').variables).toEqual([]);
  });

  it('answers a saved environment change as saved while JetStream cannot store its event', async () => {
    await admin('POST', '/environments', { name: 'events-before' });
    const jsm = await bus.jetstreamManager();
    const { config: events, state } = await jsm.streams.info(STREAMS.events.name);
    // A stream that takes no more messages: each publish is refused, as while its leader is away.
    const refuseEvents = () => jsm.streams.update(STREAMS.events.name, { ...events, max_msgs: state.messages, discard: 'new' as typeof events.discard });
    const takeEvents = () => jsm.streams.update(STREAMS.events.name, events);

    await refuseEvents();
    const back = new Promise((resolve) => setTimeout(resolve, 1000)).then(takeEvents);
    const created = await admin('POST', '/environments', { name: 'saved-while-away' });
    await back;
    expect(created.status).toBe(201);
    expect(created.json.data.webhook_signing_key).toMatch(/^whsec_/);
    // Stored once JetStream took it again, within the retry window.
    expect((await jsm.streams.info(STREAMS.events.name)).state.messages).toBe(state.messages + 1);

    // Still refused past the window: the change is saved and answered all the same.
    await refuseEvents();
    try {
      const updated = await admin('PATCH', '/environments/saved-while-away', { callback_url: 'https://example.test/back' });
      expect(updated.status).toBe(200);
      expect(updated.json.data.callback_url).toBe('https://example.test/back');
    } finally {
      await takeEvents();
    }
    expect((await admin('GET', '/environments')).json.data.find((item: { name: string }) => item.name === 'saved-while-away').callback_url).toBe('https://example.test/back');
  }, 30_000);

  it('answers gateway.environment.get over NATS without secrets', async () => {
    const environment = (await admin('GET', '/environments')).json.data.find((item: { name: string }) => item.name === 'settings');
    const info = await bus.request(gatewayContracts.getEnvironment, { public_id: environment.public_id });
    expect(info).toMatchObject({ id: environment.id, name: 'settings', webhook_url: 'https://example.test/hooks' });
    expect(JSON.stringify(info)).not.toContain('whsec_');
    await expect(bus.request(gatewayContracts.getEnvironment, { environment_id: 'env_missing' })).rejects.toMatchObject({
      code: 'unknown_environment',
    });
  });

  it('pages the given-up messages back from a time with or without an offset, and refuses one that is not a time', async () => {
    for (const before of ['2030-01-01T00:00:00Z', '2030-01-01T02:00:00+02:00', '2030-01-01T00:00:00.000-05:30']) {
      const listed = await admin('GET', `/given-up?before=${encodeURIComponent(before)}`);
      expect(listed.status).toBe(200);
      expect(Array.isArray(listed.json.data)).toBe(true);
    }
    const refused = await admin('GET', '/given-up?before=yesterday');
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('invalid_query_params');
  });
});

describe('settings at rest (case 10)', () => {
  it('stores no plaintext signing key (current or retired) or variable value, while the API and NATS still return them', async () => {
    const canaryValue = `CANARY_VARIABLE_${randomBytes(12).toString('hex')}`;
    const created = await admin('POST', '/environments', { name: 'sealed' });
    const first: string = created.json.data.webhook_signing_key;
    await admin('PATCH', '/environments/sealed', { variables: [{ name: 'CANARY', value: canaryValue }] });
    const rotated: string = (await admin('POST', '/environments/sealed/webhook-signing-key/rotate')).json.data.signing_key;

    const raw = await mongoose.createConnection(mongo.uri, { dbName: DB_NAME }).asPromise();
    try {
      const doc = await raw.collection('environments').findOne({ name: 'sealed' });
      const stored = JSON.stringify(doc);
      for (const secret of [canaryValue, first, rotated, first.slice(6), rotated.slice(6)]) expect(stored).not.toContain(secret);
      expect(doc?.['signing_keys']).toHaveLength(2);
      for (const key of doc?.['signing_keys'] ?? []) expect(key.secret).toMatch(/^lk1\.1\./);
      expect(doc?.['variables']).toEqual([{ name: 'CANARY', value: expect.stringMatching(/^lk1\.1\./) }]);
    } finally {
      await raw.close();
    }

    const key = await createKey('sealed', ['environment:variables:read']);
    expect((await call('GET', '/environment-variables', { token: key.secret })).json).toEqual([{ name: 'CANARY', value: canaryValue }]);
    const id = created.json.data.id;
    expect(await bus.request(gatewayContracts.getSigningKeys, { environment_id: id })).toEqual({ keys: [rotated, first] });
  });
});

describe('requests', () => {
  it('refuse malformed JSON with invalid_json', async () => {
    const response = await admin('POST', '/environments', '{"name":');
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe('invalid_json');
  });

  it('refuse a body that is not JSON with invalid_content_type', async () => {
    const response = await call('POST', '/admin/environments', { token: ADMIN_TOKEN, body: 'name=x', headers: { 'content-type': 'text/plain' } });
    expect(response.status).toBe(415);
    expect(response.json.error.code).toBe('invalid_content_type');
  });

  it('refuse a body over MAX_BODY_BYTES with payload_too_large', async () => {
    const response = await admin('POST', '/environments', { name: 'x'.repeat(4096) });
    expect(response.status).toBe(413);
    expect(response.json.error.code).toBe('payload_too_large');
  });

  it('ignore unknown query parameters on read routes and refuse them elsewhere', async () => {
    const read = await call('GET', '/environment-variables?foo=1', { token: BOOTSTRAP_SECRET_KEY });
    expect(read.status).toBe(200);
    const write = await admin('POST', '/environments?foo=1', { name: 'query-check' });
    expect(write.status).toBe(400);
    expect(write.json.error.code).toBe('invalid_query_params');
  });

  it('read a list given as repeated parameters past 20 of them as a list', async () => {
    const repeated = Array.from({ length: 25 }, () => 'type=proxy').join('&');
    const response = await call('GET', `/operations?${repeated}`, { token: BOOTSTRAP_SECRET_KEY });
    expect(response.status).toBe(200);
  });

  it('answer unknown routes with route_not_found and keep the caller request id', async () => {
    const response = await call('GET', '/nope', { headers: { 'x-request-id': 'trace-123' } });
    expect(response.status).toBe(404);
    expect(response.json.error.code).toBe('route_not_found');
    expect(response.headers.get('x-request-id')).toBe('trace-123');
  });

  it('route a trailing slash like the path without it', async () => {
    expect((await call('GET', '/environment-variables/', { token: BOOTSTRAP_SECRET_KEY })).status).toBe(200);
  });

  it('report health and readiness', async () => {
    expect((await call('GET', '/health')).json).toEqual({ status: 'ok' });
    const ready = await call('GET', '/ready');
    // Only the gateway runs here, so the other services are reported missing.
    expect(ready.status).toBe(503);
    expect(ready.json.services.gateway).toBe(true);
    expect(ready.json.services['credential-vault']).toBe(false);
  });

  it('report this gateway ready on /ready/self while a service does not answer its ping', async () => {
    // The credential vault (like every other service) is not running here: /ready says so,
    // while /ready/self, the probe that decides whether this pod takes traffic, does not care.
    const ready = await call('GET', '/ready');
    expect(ready.status).toBe(503);
    expect(ready.json.services['credential-vault']).toBe(false);
    const self = await call('GET', '/ready/self');
    expect(self.status).toBe(200);
    expect(self.json).toEqual({ status: 'ready' });
  });

  it('answer a proxied call no proxy replica carries through with 503 service_unavailable and Retry-After', async () => {
    // No proxy replica runs here: the call is given up at the hop's silence limit, as one a full
    // or stopping replica refuses is answered at once; either way another may take it soon.
    const refused = await call('GET', '/proxy/contacts', { token: BOOTSTRAP_SECRET_KEY, headers: { 'connection-id': 'c1', 'provider-config-key': 'crm' } });
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('service_unavailable');
    expect(refused.headers.get('retry-after')).toBe('1');
  }, 15_000);
});

describe('provider webhooks (served before express)', () => {
  const devPublicId = async () => (await admin('GET', '/environments')).json.data.find((item: { name: string }) => item.name === 'dev').public_id as string;

  it('store the raw request on JOBS, without credentials, before answering 200 with the request id', async () => {
    const publicId = await devPublicId();
    const body = '{"event":"ticket.updated","n":1}';
    const response = await call('POST', `/webhook/${publicId}/my-hooks/?serviceConnectionId=c-1&x=2`, {
      body,
      headers: { authorization: 'Bearer provider-secret', 'x-hub-signature-256': 'sha256=abc', 'x-request-id': 'hook-trace-1' },
    });
    expect(response.status).toBe(200);
    expect(response.json).toEqual({ success: true });
    expect(response.headers.get('x-request-id')).toBe('hook-trace-1');
    const jsm = await bus.jetstreamManager();
    const stored = await jsm.streams.getMessage(STREAMS.jobs.name, { last_by_subj: webhookContracts.inbound.subject });
    const job = JSON.parse(new TextDecoder().decode(stored!.data)) as InboundWebhook;
    expect(job).toMatchObject({ environment_public_id: publicId, integration: 'my-hooks', query: { serviceConnectionId: 'c-1', x: '2' } });
    expect(Buffer.from(job.body_base64, 'base64').toString()).toBe(body);
    expect(job.headers['x-hub-signature-256']).toBe('sha256=abc');
    expect(job.headers['authorization']).toBeUndefined();
    expect(stored?.header.get('x-request-id')).toBe('hook-trace-1');
  });

  it('answer other methods and path shapes with route_not_found', async () => {
    const publicId = await devPublicId();
    for (const [method, path] of [
      ['GET', `/webhook/${publicId}/my-hooks`],
      ['POST', `/webhook/${publicId}`],
      ['POST', `/webhook/${publicId}/my-hooks/extra`],
      ['POST', '/webhook'],
    ] as const) {
      const response = await call(method, path, method === 'POST' ? { body: '{}' } : {});
      expect([path, response.status, response.json.error.code]).toEqual([path, 404, 'route_not_found']);
    }
  });

  it('refuse an unknown environment, a bad integration name and an oversized body', async () => {
    const publicId = await devPublicId();
    expect((await call('POST', '/webhook/nope-env/my-hooks', { body: '{}' })).json.error.code).toBe('unknown_environment');
    const bad = await call('POST', `/webhook/${publicId}/bad%20name`, { body: '{}' });
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_uri_params']);
    const large = await call('POST', `/webhook/${publicId}/my-hooks`, { body: 'x'.repeat(4096), headers: { 'content-type': 'text/plain' } });
    expect([large.status, large.json.error.code]).toEqual([413, 'payload_too_large']);
  });

  it('refuse an unknown environment before reading the body: a made-up URL costs no upload', async () => {
    const large = await call('POST', '/webhook/nope-env/my-hooks', { body: 'x'.repeat(4096), headers: { 'content-type': 'text/plain' } });
    expect([large.status, large.json.error.code]).toEqual([404, 'unknown_environment']);
  });

  it("hold each environment to its bytes a minute (1 MiB here), with 429 and Retry-After past it, other environments untouched", async () => {
    await admin('POST', '/environments', { name: 'flooded' });
    const environments = (await admin('GET', '/environments')).json.data as Array<{ name: string; public_id: string }>;
    const flooded = environments.find((item) => item.name === 'flooded')!.public_id;
    // 2,000 bytes and the 1 KiB each webhook counts besides: 347 fit in a minute's 1 MiB, twice
    // that if the minute turns during the test.
    const body = 'x'.repeat(2000);
    let accepted = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    while (refused === undefined && accepted < 1000) {
      const response = await call('POST', `/webhook/${flooded}/any-name-${accepted}`, { body, headers: { 'content-type': 'text/plain' } });
      if (response.status === 200) accepted++;
      else refused = response;
    }
    expect(accepted).toBeGreaterThanOrEqual(340);
    expect(accepted).toBeLessThan(700);
    expect([refused?.status, refused?.json.error.code]).toEqual([429, 'too_many_requests']);
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A body declared past the budget is refused before it is sent: this one never is.
    const declaredOnly = await startUpload(`/webhook/${flooded}/any-name`, 2000);
    expect(await declaredOnly.answer).toMatchObject({ status: 429 });
    declaredOnly.abort();
    expect((await call('POST', `/webhook/${await devPublicId()}/my-hooks`, { body: '{}' })).status).toBe(200);
  }, 60_000);

  it('hold no more than WEBHOOK_BODIES_HELD_BYTES of bodies on their way (5,000 here), counted as they arrive: past it, 503', async () => {
    const publicId = await devPublicId();
    // Declared lengths hold nothing: two uploads that declare 2,000 bytes each and send none
    // leave room for a webhook of 1,500.
    const silent = [await startUpload(`/webhook/${publicId}/silent-1`, 2000), await startUpload(`/webhook/${publicId}/silent-2`, 2000)];
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await call('POST', `/webhook/${publicId}/my-hooks`, { body: 'x'.repeat(1500), headers: { 'content-type': 'text/plain' } })).status).toBe(200);
    for (const upload of silent) upload.abort();
    // Bytes that arrived do: two uploads that sent 1,999 of their 2,000 hold 3,998.
    const first = await startUpload(`/webhook/${publicId}/held-1`, 2000, 1999);
    const second = await startUpload(`/webhook/${publicId}/held-2`, 2000, 1999);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const third = await call('POST', `/webhook/${publicId}/held-3`, { body: 'x'.repeat(1500), headers: { 'content-type': 'text/plain' } });
    expect([third.status, third.json.error.code]).toEqual([503, 'service_unavailable']);
    // Senders gone: what they held is given back, and a webhook gets in again.
    first.abort();
    second.abort();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await call('POST', `/webhook/${publicId}/my-hooks`, { body: 'x'.repeat(1500), headers: { 'content-type': 'text/plain' } })).status).toBe(200);
  });
});
