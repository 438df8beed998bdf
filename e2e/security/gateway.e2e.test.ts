import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import mongoose from 'mongoose';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startMongo, startOAuth1Server, startOAuthServer, type TestMongo, type TestOAuth1Server, type TestOAuthServer } from '@latchkey/testing';
import { launchBrowser } from '../support/browser.js';
import { apiKeyProviderYaml, writeProvidersFile } from '../support/providers.js';
import { http, startStack, type Stack } from '../support/stack.js';

/**
 * Attacks on the gateway: authentication floods, database outages, its pages and the secrets it
 * stores. One stack for the file; each test is one case of the issue, written as the attack.
 * The gateway trusts one proxy hop (TRUSTED_PROXY_HOPS=1) so that attackers can be told apart by
 * X-Forwarded-For; requests without it come from the socket's peer.
 */

/** A loopback TCP relay to the database that a test can cut and restore: an outage for the gateway only. */
interface Relay {
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

async function startRelay(targetPort: number): Promise<Relay> {
  const sockets = new Set<Socket>();
  let up = true;
  const server: Server = createServer((client) => {
    if (!up) return void client.destroy();
    const upstream = connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut: () => {
      up = false;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      up = true;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A customer's web app on loopback: a blank page at any path, on its own origin. */
async function startCustomerApp(): Promise<{ origin: string; close(): Promise<void> }> {
  const server: HttpServer = createHttpServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end('<!doctype html><title>customer app</title><p>customer app</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

jest.setTimeout(30_000);

let stack: Stack;
let relay: Relay;
let oauth: TestOAuthServer;
let oauth1: TestOAuth1Server;
let browser: Browser;
let registeredApp: Awaited<ReturnType<typeof startCustomerApp>>;
let strangerApp: Awaited<ReturnType<typeof startCustomerApp>>;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
const admin = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.adminToken, ...(body === undefined ? {} : { body }) });
const wellFormedKey = () => `lk_sk_${randomBytes(32).toString('base64url')}`;
const canary = (name: string) => `CANARY_${name}_${randomBytes(12).toString('hex')}`;

/** Every log line every process of the stack printed so far. */
const allOutput = () => [...stack.gateways, ...stack.services].map((proc) => proc.output()).join('\n');

async function get(path: string, token: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const response = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined, ms: performance.now() - started };
}

let mongo: TestMongo;
/** A canary in the gateway's environment: the key that seals settings at rest. */
const settingsKey = randomBytes(32);

beforeAll(async () => {
  // The stack's database, reached by the gateway only through a relay a test can cut.
  [mongo, oauth, oauth1, browser, registeredApp, strangerApp] = await Promise.all([
    startMongo(),
    startOAuthServer(),
    startOAuth1Server({ consumers: [{ key: 'consumer-key', secret: 'consumer-secret' }] }),
    launchBrowser(),
    startCustomerApp(),
    startCustomerApp(),
  ]);
  const providersFile = writeProvidersFile(
    `${apiKeyProviderYaml('http://127.0.0.1:9')}loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n` +
      `loopback-oauth1:\n  display_name: Loopback OAuth 1\n  categories: [test]\n  auth_mode: OAUTH1\n  request_url: ${oauth1.requestTokenUrl}\n  authorization_url: ${oauth1.authorizationUrl}\n  token_url: ${oauth1.accessTokenUrl}\n`,
  );
  const mongoPort = Number(new URL(mongo.uri.replace(/^mongodb:/, 'http:')).port);
  relay = await startRelay(mongoPort);
  const given = process.env['MONGODB_URI'];
  process.env['MONGODB_URI'] = mongo.uri;
  try {
    stack = await startStack({
      // The OAuth server is on loopback: the vault's token calls may reach 127.0.0.1 only.
      env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
      serviceEnv: { gateway: { MONGODB_URI: mongo.uri.replace(`:${mongoPort}`, `:${relay.port}`), TRUSTED_PROXY_HOPS: '1', AUTH_FAILURES_PER_MINUTE: '30', SETTINGS_ENCRYPTION_KEYS: `v1:${settingsKey.toString('base64')}` } },
    });
  } finally {
    if (given === undefined) delete process.env['MONGODB_URI'];
    else process.env['MONGODB_URI'] = given;
  }
  await api('POST', '/integrations', { provider: 'loopback-api', unique_key: 'keys', display_name: 'Acme API' });
  await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', display_name: 'Loopback OAuth', credentials: { client_id: 'test-client', client_secret: 'test-secret' } });
  await api('POST', '/integrations', { provider: 'loopback-oauth1', unique_key: 'oauth1', display_name: 'Loopback OAuth 1', credentials: { client_id: 'consumer-key', client_secret: 'consumer-secret' } });
  const registered = await admin('PATCH', '/admin/environments/dev', { connect_return_origins: [registeredApp.origin] });
  if (registered.status !== 200) throw new Error(`could not register the return origin: ${JSON.stringify(registered.json)}`);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
  await Promise.all([relay?.close(), oauth?.close(), oauth1?.close(), registeredApp?.close(), strangerApp?.close()]);
  await mongo?.dispose();
});

describe('gateway security', () => {
  test('case 7: a flood of random well-formed unknown keys from one address is cut off with 429 while a legitimate key keeps working', async () => {
    const attacker = { 'x-forwarded-for': '203.0.113.66' };
    // The legitimate client shares the attacker's address (a NAT): its key is known, so it passes.
    expect((await get('/environment-variables', stack.bootstrapKey, attacker)).status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 200 }, () => get('/environment-variables', wellFormedKey(), attacker)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(30);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThanOrEqual(170);
    const refused = answers.find((answer) => answer.status === 429)!;
    expect(refused.json.error.code).toBe('too_many_requests');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Still blocked, still cheap; the legitimate key still works from the same address and from its own.
    expect((await get('/environment-variables', wellFormedKey(), attacker)).status).toBe(429);
    expect((await get('/environment-variables', stack.bootstrapKey, attacker)).status).toBe(200);
    expect((await get('/environment-variables', stack.bootstrapKey)).status).toBe(200);
    // Another address is not affected by the attacker's failures.
    const other = await get('/environment-variables', wellFormedKey(), { 'x-forwarded-for': '198.51.100.7' });
    expect(other.status).toBe(401);
    expect(other.json.error.code).toBe('unknown_api_key');
  });

  test('case 7: malformed keys are refused as unknown_api_key, and a forged X-Forwarded-For does not move the attacker', async () => {
    for (const key of ['short', `lk_sk_${'a'.repeat(42)}`, `${stack.bootstrapKey}x`, 'x'.repeat(200)]) {
      const answer = await get('/environment-variables', key, { 'x-forwarded-for': '192.0.2.10' });
      expect(answer.status).toBe(401);
      expect(answer.json.error.code).toBe('unknown_api_key');
    }
    // One trusted hop: only the rightmost entry counts; what the attacker writes to the left is ignored.
    const forged = await get('/environment-variables', wellFormedKey(), { 'x-forwarded-for': '198.51.100.99, 203.0.113.66' });
    expect(forged.status).toBe(429);
  });

  test('case 7: unknown connect-session tokens count against the address too, and a flood of them is cut off with 429', async () => {
    const attacker = { 'x-forwarded-for': '203.0.113.77' };
    const sessionToken = () => `lk_cs_${randomBytes(32).toString('base64url')}`;
    const malformed = await get('/connect/session', 'not-a-session-token', attacker);
    expect(malformed.status).toBe(401);
    expect(malformed.json.error.code).toBe('unknown_connect_session_token');
    const answers = await Promise.all(Array.from({ length: 60 }, () => get('/connect/session', sessionToken(), attacker)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(29);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThanOrEqual(31);
    expect(answers.find((answer) => answer.status === 429)!.headers.get('retry-after')).toMatch(/^\d+$/);
    // The same address is refused for API keys too: one count per client.
    expect((await get('/environment-variables', wellFormedKey(), attacker)).status).toBe(429);
  });

  // The gateway gives up on the database after 1 s (MONGODB_SERVER_SELECTION_TIMEOUT_MS). Each
  // answer is bounded at 4 s, not 1.7, which left a loaded machine 0.7 s of room: still well
  // short of the 10 s an operation would otherwise wait for the database.
  test('case 17: while the database is down an uncached key gets a coded 503 within seconds, and all recovers when it is back', async () => {
    // The bootstrap key and its environment are in the gateway's memory now.
    expect((await get('/environment-variables', stack.bootstrapKey)).status).toBe(200);
    relay.cut();
    try {
      for (let i = 0; i < 3; i++) {
        const answer = await get('/environment-variables', wellFormedKey());
        expect(answer.status).toBe(503);
        expect(answer.json.error.code).toBe('service_unavailable');
        expect(answer.ms).toBeLessThan(4_000);
      }
      // A route that reads the database with a cached key fails the same way.
      const operations = await get('/operations', stack.bootstrapKey);
      expect(operations.status).toBe(503);
      expect(operations.json.error.code).toBe('service_unavailable');
      expect(operations.ms).toBeLessThan(4_000);
      // What the gateway holds in memory (the key, its environment) still answers.
      expect((await get('/environment-variables', stack.bootstrapKey)).status).toBe(200);
    } finally {
      relay.restore();
    }
    const deadline = Date.now() + 20_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await get('/environment-variables', stack.bootstrapKey)).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(200);
    const unknown = await get('/environment-variables', wellFormedKey());
    expect(unknown.status).toBe(401);
  });

  test('case 10: signing keys (current and retired) and variable values are not stored in plaintext, yet the API returns them where it must', async () => {
    const variable = canary('VARIABLE');
    const created = await admin('POST', '/admin/environments', { name: `sealed-${randomBytes(3).toString('hex')}` });
    expect(created.status).toBe(201);
    const name: string = created.json.data.name;
    const retired: string = created.json.data.webhook_signing_key;
    expect((await admin('PATCH', `/admin/environments/${name}`, { variables: [{ name: 'CANARY', value: variable }] })).status).toBe(200);
    const current: string = (await admin('POST', `/admin/environments/${name}/webhook-signing-key/rotate`)).json.data.signing_key;
    expect(current).toMatch(/^whsec_/);

    // What a stolen database holds: the raw documents of the gateway's database.
    const db = await mongoose.createConnection(stack.mongo.uri, { dbName: stack.dbName('gateway') }).asPromise();
    try {
      const everything = JSON.stringify(await db.collection('environments').find({}).toArray());
      const keyMaterial = [settingsKey.toString('base64'), settingsKey.toString('base64url'), settingsKey.toString('hex')];
      for (const secret of [variable, retired, current, retired.slice('whsec_'.length), current.slice('whsec_'.length), ...keyMaterial]) {
        expect(everything).not.toContain(secret);
      }
      expect(everything).toContain('lk1.');
    } finally {
      await db.close();
    }

    // The API still gives the variable to a key of that environment, and never the signing keys in settings views.
    const key = await admin('POST', `/admin/environments/${name}/api-keys`, { display_name: 'reader', scopes: ['environment:variables:read'] });
    expect((await get('/environment-variables', key.json.data.secret)).json).toEqual([{ name: 'CANARY', value: variable }]);
    const listed = JSON.stringify((await admin('GET', '/admin/environments')).json);
    expect(listed).toContain(variable);
    expect(listed).not.toContain(current);
    expect(listed).not.toContain(retired);
    // No log line of any process carries them.
    const logs = allOutput();
    for (const secret of [variable, retired, current, settingsKey.toString('base64')]) expect(logs).not.toContain(secret);
    expect(listed).not.toContain(settingsKey.toString('base64'));
  });

  test('case 15: /oauth/callback is served with the Connect UI page headers (CSP with a nonce, no referrer, no cache)', async () => {
    // A provider's long error description, or a parameter given twice, still gets the page.
    const odd = [`/oauth/callback?error=x&error_description=${'a'.repeat(1100)}`, '/oauth/callback?code=a&code=b&state=s'];
    for (const path of ['/oauth/callback?error=access_denied', '/oauth/callback?code=x&state=forged', '/connect?session_token=x', ...odd]) {
      const response = await fetch(`${stack.url}${path}`);
      await response.text();
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=]{20,}'/);
      expect(csp).not.toContain("'unsafe-inline' 'unsafe-eval'");
    }
    const page = await (await fetch(`${stack.url}/oauth/callback?error=access_denied`)).text();
    expect(page).not.toContain("'*'");
  });

  test('case 15: the OAuth result reaches an opener on a registered origin and never one on another origin', async () => {
    const messagesAt = async (app: { origin: string }, integration = 'oauth') => {
      const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: [integration] })).json.data;
      const context = await loopbackOnly();
      const opener = await context.newPage();
      await opener.goto(`${app.origin}/app`);
      await opener.evaluate(() => {
        const win = globalThis as unknown as { messages: unknown[]; addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void };
        win.messages = [];
        win.addEventListener('message', (event) => win.messages.push(event.data));
      });
      const [popup] = await Promise.all([
        opener.waitForEvent('popup'),
        opener.evaluate((url) => void (globalThis as unknown as { open(url: string): unknown }).open(url), `${stack.url}/oauth/connect/${integration}?connect_session_token=${encodeURIComponent(token)}`),
      ]);
      await popup.waitForEvent('close', { timeout: 15_000 });
      await opener.waitForTimeout(300);
      const messages = await opener.evaluate(() => (globalThis as unknown as { messages: unknown[] }).messages);
      await context.close();
      return messages;
    };
    expect(await messagesAt(registeredApp)).toEqual([{ type: 'connect', connectionId: expect.any(String), providerConfigKey: 'oauth' }]);
    expect(await messagesAt(strangerApp)).toEqual([]);
    // A failed flow is told as well: the end user refused at the provider, or the provider
    // refused the code.
    oauth.setOptions({ denyAuthorization: true });
    try {
      expect(await messagesAt(registeredApp)).toEqual([{ type: 'error', error: expect.stringContaining('denied') }]);
      expect(await messagesAt(strangerApp)).toEqual([]);
    } finally {
      oauth.setOptions({ denyAuthorization: false });
    }
    oauth.failNextToken(400, { error: 'invalid_grant' });
    expect(await messagesAt(registeredApp)).toEqual([{ type: 'error', error: expect.stringContaining('invalid_grant') }]);
    // An OAuth 1.0a provider's refusal (`denied=<temporary token>`, no verifier) too.
    expect(await messagesAt(registeredApp, 'oauth1')).toEqual([{ type: 'connect', connectionId: expect.any(String), providerConfigKey: 'oauth1' }]);
    oauth1.denyAuthorization(true);
    try {
      expect(await messagesAt(registeredApp, 'oauth1')).toEqual([{ type: 'error', error: expect.stringContaining('denied') }]);
      expect(await messagesAt(strangerApp, 'oauth1')).toEqual([]);
    } finally {
      oauth1.denyAuthorization(false);
    }
    // Eight flows in a browser, each up to 15 s for its popup to close: jest's 30 s ran out on a loaded machine.
  }, 120_000);

  for (const [form, returnUrl] of [
    ['https://evil.example/', 'https://evil.example/'],
    ['//evil.example', '//evil.example'],
    ['javascript:', 'javascript:document.title="pwned"'],
    ['/\\evil.example', '/\\evil.example'],
  ] as const) {
    test(`case 21: return_url ${form} is not followed`, async () => {
      const { page, context, attempted } = await connectWithReturnUrl(returnUrl);
      await page.waitForTimeout(1_500);
      expect(new URL(page.url()).origin).toBe(stack.url);
      expect(await page.title()).not.toBe('pwned');
      expect(attempted.filter((url) => url.includes('evil.example'))).toEqual([]);
      await context.close();
    });
  }

  test('case 21: a return_url on a registered origin is followed, and one on another loopback origin is not', async () => {
    const good = await connectWithReturnUrl(`${registeredApp.origin}/done?ok=1`);
    await good.page.waitForURL(`${registeredApp.origin}/done?ok=1`);
    await good.context.close();
    const stranger = await connectWithReturnUrl(`${strangerApp.origin}/done`);
    await stranger.page.waitForTimeout(1_500);
    expect(new URL(stranger.page.url()).origin).toBe(stack.url);
    await stranger.context.close();
    // The operator API takes origins only.
    for (const bad of ['https://app.example.com/path', 'javascript:alert(1)', '//app.example.com', 'https://user:pw@app.example.com']) {
      expect((await admin('PATCH', '/admin/environments/dev', { connect_return_origins: [bad] })).status).toBe(400);
    }
  });
});

/** A browser context that lets pages reach loopback only; anything else is aborted and recorded. */
async function loopbackOnly(attempted: string[] = []): Promise<BrowserContext> {
  const context = await browser.newContext();
  await context.route(
    (url) => !['127.0.0.1', 'localhost'].includes(url.hostname),
    (route) => {
      attempted.push(route.request().url());
      return route.abort();
    },
  );
  return context;
}

/** An end user connects the API-key integration in the Connect UI opened with `return_url`. */
async function connectWithReturnUrl(returnUrl: string): Promise<{ page: Page; context: BrowserContext; attempted: string[] }> {
  const { connect_link: link } = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data;
  const attempted: string[] = [];
  const context = await loopbackOnly(attempted);
  const page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.dismiss());
  await page.goto(`${link}&return_url=${encodeURIComponent(returnUrl)}`);
  await page.getByLabel('API key').fill(`key-${randomBytes(4).toString('hex')}`);
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByRole('heading', { name: 'Acme API is connected' }).waitFor();
  return { page, context, attempted };
}
