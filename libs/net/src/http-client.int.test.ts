import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createAddressPolicy } from './address-policy.js';
import { OutboundRequestError, createHttpClient } from './http-client.js';
import type { ResolveAll } from './safe-lookup.js';

/**
 * The one outbound client against real servers on loopback: 127.0.0.1 is allowed (as the e2e
 * stack allows it), 127.0.0.3 is not, and every refusal must come before a socket reaches it.
 */
interface Upstream {
  server: Server;
  url: string;
  connections: number;
  bodies: string[];
}

async function startUpstream(host: string, handler?: (url: string) => { status: number; location?: string }): Promise<Upstream> {
  const upstream: Upstream = { server: createServer(), url: '', connections: 0, bodies: [] };
  upstream.server.on('connection', () => (upstream.connections += 1));
  upstream.server.on('request', (req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      upstream.bodies.push(body);
      const answer = handler?.(req.url ?? '/') ?? { status: 200 };
      res.writeHead(answer.status, answer.location ? { location: answer.location } : {});
      res.end(req.url === '/big' ? 'x'.repeat(256 * 1024) : '{"ok":true}');
    });
  });
  upstream.server.listen(0, host);
  await once(upstream.server, 'listening');
  upstream.url = `http://${host}:${(upstream.server.address() as AddressInfo).port}`;
  return upstream;
}

let allowed: Upstream;
let forbidden: Upstream;
let redirector: Upstream;
const client = createHttpClient({ policy: createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }) });
const CANARY = `canary-secret-${Math.random().toString(36).slice(2)}`;

beforeAll(async () => {
  forbidden = await startUpstream('127.0.0.3');
  allowed = await startUpstream('127.0.0.1');
  redirector = await startUpstream('127.0.0.1', () => ({ status: 307, location: `${forbidden.url}/token` }));
});

afterAll(async () => {
  client.close();
  for (const upstream of [allowed, forbidden, redirector]) upstream.server.close();
});

beforeEach(() => {
  for (const upstream of [allowed, forbidden, redirector]) {
    upstream.connections = 0;
    upstream.bodies = [];
  }
});

async function refusal(run: Promise<unknown>): Promise<OutboundRequestError> {
  const error = await run.then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(OutboundRequestError);
  return error as OutboundRequestError;
}

describe('the outbound HTTP client', () => {
  it('reaches an allowed address', async () => {
    const response = await client.request(`${allowed.url}/token`, { method: 'POST', form: { a: 'b' }, timeoutMs: 2000 });
    expect(response.statusCode).toBe(200);
    expect(allowed.bodies).toEqual(['a=b']);
  });

  it('case 3: refuses an IP literal the operator did not allow before any socket opens', async () => {
    const error = await refusal(client.request(`${forbidden.url}/token`, { method: 'POST', form: { client_secret: CANARY }, timeoutMs: 2000 }));
    expect(error.reason).toBe('upstream_not_allowed');
    expect(error.message).not.toContain(CANARY);
    expect(forbidden.connections).toBe(0);
  });

  it('case 3: refuses a name that resolves to a refused address before any socket opens', async () => {
    const resolve: ResolveAll = (_hostname, _options, callback) => callback(null, [{ address: '127.0.0.3', family: 4 }]);
    const viaDns = createHttpClient({ policy: createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }), resolve });
    const port = new URL(forbidden.url).port;
    const error = await refusal(viaDns.request(`http://token.provider.example:${port}/token`, { method: 'POST', form: { client_secret: CANARY }, timeoutMs: 2000 }));
    viaDns.close();
    expect(error.reason).toBe('upstream_not_allowed');
    expect(forbidden.connections).toBe(0);
  });

  it('case 3: checks every redirect hop, and follows none unless asked', async () => {
    const unfollowed = await client.request(`${redirector.url}/token`, { method: 'POST', form: { client_secret: CANARY }, timeoutMs: 2000 });
    expect(unfollowed.statusCode).toBe(307);
    const error = await refusal(client.request(`${redirector.url}/token`, { method: 'POST', form: { client_secret: CANARY }, timeoutMs: 2000, followRedirects: true }));
    expect(error.reason).toBe('upstream_not_allowed');
    expect(forbidden.connections).toBe(0);
    expect(forbidden.bodies.join()).not.toContain(CANARY);
  });

  it('follows a redirect within its origin, and none to another origin, whose headers and body would go along', async () => {
    const within = await startUpstream('127.0.0.1', (url) => (url === '/token' ? { status: 307, location: '/moved' } : { status: 200 }));
    const across = await startUpstream('127.0.0.1', () => ({ status: 307, location: `${allowed.url}/token` }));
    try {
      const followed = await client.request(`${within.url}/token`, { method: 'POST', form: { a: 'b' }, timeoutMs: 2000, followRedirects: true });
      expect(followed).toMatchObject({ statusCode: 200 });
      expect(within.bodies).toEqual(['a=b', 'a=b']);
      const request = client.request(`${across.url}/token`, { method: 'POST', headers: { 'x-api-key': CANARY }, form: { client_secret: CANARY }, timeoutMs: 2000, followRedirects: true });
      expect((await refusal(request)).reason).toBe('cross_origin_redirect');
      expect(allowed.connections).toBe(0);
    } finally {
      within.server.close();
      across.server.close();
    }
  });

  it('keeps the status but not a body larger than the limit', async () => {
    const response = await client.request(`${allowed.url}/big`, { timeoutMs: 2000, maxResponseBytes: 1024 });
    expect(response).toMatchObject({ statusCode: 200, body: '', truncated: true });
    expect((await client.request(`${allowed.url}/big`, { timeoutMs: 2000 })).body).toHaveLength(256 * 1024);
  });

  it('refuses schemes other than http and https', async () => {
    expect((await refusal(client.request('file:///etc/passwd', { timeoutMs: 1000 }))).reason).toBe('invalid_url');
  });
});
