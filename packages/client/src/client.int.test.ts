import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Latchkey } from './client.js';
import { LatchkeyError } from './errors.js';

/**
 * The client against a real server on loopback standing in for the gateway: what it sends, how
 * long it waits, and how it reads the answers. The gateway's own behaviour is the e2e tests'.
 */

interface Seen {
  method: string;
  url: string;
  body: string;
}

let server: Server;
let host: string;
const seen: Seen[] = [];
/** What the next requests get, by path (without the query); a missing one answers 200 `{}`. */
let answers: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {};

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Answers after `ms`, unless the caller went away first. */
const after = (ms: number, answer: (res: ServerResponse) => void) => (req: IncomingMessage, res: ServerResponse) => {
  const timer = setTimeout(() => answer(res), ms);
  res.once('close', () => clearTimeout(timer));
};

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      const answer = answers[(req.url ?? '').split('?')[0]!];
      if (answer) answer(req, res);
      else json(res, 200, {});
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  host = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

beforeEach(() => {
  seen.length = 0;
  answers = {};
});

async function rejection(promise: Promise<unknown>): Promise<LatchkeyError> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(LatchkeyError);
  return error as LatchkeyError;
}

const target = { providerConfigKey: 'api', connectionId: 'c-1' };

describe('timeouts', () => {
  it('reports a call that got no answer in time as a timeout that may still complete, not as Latchkey being unreachable', async () => {
    answers['/action/trigger'] = after(5_000, (res) => json(res, 200, { late: true }));
    const latchkey = new Latchkey({ host, apiKey: 'lk_sk_test', timeoutMs: 200 });
    const error = await rejection(latchkey.triggerAction('api', 'c-1', 'slow'));
    expect(error).toMatchObject({ status: 0, code: 'timeout' });
    expect(error.message).toContain('200 ms');
    expect(error.message).toContain('may still complete');
    expect(error.message).not.toContain('Cannot reach');

    answers['/proxy/slow'] = after(5_000, (res) => json(res, 200, {}));
    const proxied = await rejection(latchkey.get({ ...target, endpoint: '/slow' }));
    expect(proxied).toMatchObject({ status: 0, code: 'timeout' });
    const streamed = await rejection(latchkey.get({ ...target, endpoint: '/slow', responseType: 'stream' }));
    expect(streamed).toMatchObject({ status: 0, code: 'timeout' });
  });

  it('still reports a refused connection as Latchkey being unreachable', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    await once(closed, 'close');
    const error = await rejection(new Latchkey({ host: `http://127.0.0.1:${port}`, apiKey: 'lk_sk_test' }).getScriptsConfig());
    expect(error).toMatchObject({ status: 0, code: 'ECONNREFUSED' });
    expect(error.message).toContain('Cannot reach Latchkey');
  });

  it('takes a timeout per call, over the client-wide one, for actions, proxy calls, syncs and connections', async () => {
    const latchkey = new Latchkey({ host, apiKey: 'lk_sk_test', timeoutMs: 100 });
    answers['/action/trigger'] = after(400, (res) => json(res, 200, { done: true }));
    await expect(latchkey.triggerAction('api', 'c-1', 'slow', { n: 1 }, { timeoutMs: 5_000 })).resolves.toEqual({ done: true });
    answers['/proxy/slow'] = after(400, (res) => json(res, 200, { done: true }));
    await expect(latchkey.get({ ...target, endpoint: '/slow', timeoutMs: 5_000 })).resolves.toMatchObject({ data: { done: true } });
    answers['/sync/trigger'] = after(400, (res) => json(res, 200, { success: true }));
    await expect(latchkey.triggerSync('api', [], undefined, { timeoutMs: 5_000 })).resolves.toEqual({ success: true });
    answers['/connections/c-1'] = after(400, (res) => json(res, 200, { connection_id: 'c-1' }));
    await expect(latchkey.getConnection('api', 'c-1', true, false, { timeoutMs: 5_000 })).resolves.toMatchObject({ connection_id: 'c-1' });
    // And shorter than the client-wide one.
    const patient = new Latchkey({ host, apiKey: 'lk_sk_test' });
    await expect(patient.triggerAction('api', 'c-1', 'slow', undefined, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'timeout' });
  });
});

describe('what the calls send', () => {
  const latchkey = () => new Latchkey({ host, apiKey: 'lk_sk_test' });

  it('triggerSync sends sync_mode', async () => {
    await latchkey().triggerSync('api', ['tickets'], 'c-1', { syncMode: 'full_refresh' });
    expect(JSON.parse(seen[0]!.body)).toEqual({ provider_config_key: 'api', syncs: ['tickets'], connection_id: 'c-1', sync_mode: 'full_refresh' });
    await latchkey().triggerSync('api', ['tickets']);
    expect(JSON.parse(seen[1]!.body)).toEqual({ provider_config_key: 'api', syncs: ['tickets'] });
  });

  it('getConnection sends refresh_vendor_app_jwt_token when asked', async () => {
    await latchkey().getConnection('api', 'c-1', false, false, { refreshVendorAppJwtToken: true });
    expect(new URL(seen[0]!.url, host).searchParams.get('refresh_vendor_app_jwt_token')).toBe('true');
    await latchkey().getConnection('api', 'c-1');
    expect(new URL(seen[1]!.url, host).searchParams.has('refresh_vendor_app_jwt_token')).toBe(false);
  });
});

describe("the proxy's errors", () => {
  const latchkey = () => new Latchkey({ host, apiKey: 'lk_sk_test' });

  it("takes an envelope without the Latchkey-Error header for the provider's answer", async () => {
    answers['/proxy/tickets/9'] = (_, res) => json(res, 404, { error: { code: 'not_found', message: 'No such ticket' } });
    const error = await rejection(latchkey().get({ ...target, endpoint: '/tickets/9' }));
    expect(error).toMatchObject({ status: 404, code: 'provider_error', payload: { status: 404, data: { error: { code: 'not_found', message: 'No such ticket' } } } });
    answers['/proxy/admin'] = (_, res) => json(res, 403, { error: { code: 'forbidden', message: 'Admins only' } });
    expect(await rejection(latchkey().get({ ...target, endpoint: '/admin' }))).toMatchObject({ status: 403, code: 'provider_error' });
  });

  it('takes an answer with the Latchkey-Error header for the gateway\'s, with or without a body (HEAD)', async () => {
    answers['/proxy/x'] = (req, res) => json(res, 404, { error: { code: 'unknown_connection', message: 'No connection c-1' } }, { 'latchkey-error': 'unknown_connection' });
    expect(await rejection(latchkey().get({ ...target, endpoint: '/x' }))).toMatchObject({ status: 404, code: 'unknown_connection', message: 'No connection c-1', payload: undefined });
    expect(await rejection(latchkey().proxy({ ...target, endpoint: '/x', method: 'HEAD' }))).toMatchObject({ status: 404, code: 'unknown_connection' });
    // A provider's HEAD answer has no body either: the provider's.
    answers['/proxy/gone'] = (_, res) => json(res, 404, {});
    expect(await rejection(latchkey().proxy({ ...target, endpoint: '/gone', method: 'HEAD' }))).toMatchObject({ status: 404, code: 'provider_error' });
  });

  it("never replays a provider's 429, whatever its body; waits out and replays the gateway's", async () => {
    answers['/proxy/charge'] = (_, res) => json(res, 429, { error: { code: 'too_many_requests', message: 'Slow down' } }, { 'retry-after': '1' });
    const error = await rejection(latchkey().post({ ...target, endpoint: '/charge', data: { amount: 1 } }));
    expect(error).toMatchObject({ status: 429, code: 'provider_error', retryAfter: 1 });
    expect(seen).toHaveLength(1);

    let calls = 0;
    answers['/proxy/limited'] = (_, res) => {
      calls += 1;
      if (calls === 1) json(res, 429, { error: { code: 'too_many_requests', message: 'Rate limit' } }, { 'retry-after': '1', 'latchkey-error': 'too_many_requests' });
      else json(res, 200, { ok: true });
    };
    await expect(latchkey().get({ ...target, endpoint: '/limited' })).resolves.toMatchObject({ status: 200, data: { ok: true } });
    expect(calls).toBe(2);
  });
});
