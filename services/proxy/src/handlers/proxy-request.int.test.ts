import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGzip } from 'node:zlib';
import { createBus, createOperationLog, operationsOfPages, servePullStream, type Bus } from '@latchkey/bus';
import { proxyContracts, type Operation, type ProxyReplyMeta } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { createAddressPolicy, createSafeLookup, parseCidrList } from '@latchkey/net';
import { startNats, type TestNats } from '@latchkey/testing';
import type { Dispatcher } from 'undici';
import { createCredentialCache, credentialKey, type CredentialCache } from '../domain/credential-cache.js';
import { callUpstream, createUpstreamDispatcher } from '../upstream/call-upstream.js';
import { proxyMetaFixture } from '../domain/meta-fixture.js';
import { proxyRequestHandler } from './proxy-request.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let bus: Bus;
let upstream: Server;
const policy = createAddressPolicy({ allowCidrs: parseCidrList('127.0.0.1/32') });
let dispatcher: Dispatcher;

beforeAll(async () => {
  nats = await startNats();
  bus = await createBus({ servers: nats.url, service: 'proxy', identity: nats.credentials('proxy'), logger, requestTimeoutMs: 5_000 });
  // The provider: `/down` answers 503, any other path 200.
  upstream = createServer((req, res) => res.writeHead(req.url === '/down' ? 503 : 200, { 'content-type': 'text/plain' }).end('answer'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  dispatcher = createUpstreamDispatcher(createSafeLookup(policy));
});

afterAll(async () => {
  await dispatcher?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  await bus?.drain();
  await nats?.dispose();
});

/** Two calls through a replica's handler, one the provider answers 200 and one 503: their answers and what reached the log. */
async function callsLogged(logSuccesses: boolean): Promise<{ statuses: number[]; logged: Operation[] }> {
  const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
  const { port } = upstream.address() as AddressInfo;
  const credentials = { id: 'c1', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: `http://127.0.0.1:${port}`, headers: {}, query: {}, decompress: false };
  cache.set(credentialKey(proxyMetaFixture('ok')), credentials, cache.generation());
  const logged: Operation[] = [];
  const operations = createOperationLog({ logger, flushMs: 60_000, send: async (pages) => void logged.push(...operationsOfPages(pages)) });
  const handle = proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: 5_000, maxRedirects: 0 }, retryCapMs: 100, operations, logSuccesses });

  const statuses: number[] = [];
  for (const path of ['ok', 'down']) {
    await new Promise<void>((resolve) => {
      void handle({
        meta: proxyMetaFixture(path),
        body: new Uint8Array(0),
        respond: (answer: ProxyReplyMeta) => {
          statuses.push(answer.ok ? answer.status : 0);
          resolve();
        },
      });
    });
  }
  await operations.flush();
  return { statuses, logged };
}

describe('the operations log of proxied calls', () => {
  it('holds every call by default', async () => {
    const { statuses, logged } = await callsLogged(true);
    expect(statuses).toEqual([200, 503]);
    expect(logged.map((operation) => [operation.status, operation.proxy?.path, operation.proxy?.upstream_status])).toEqual([
      ['success', '/ok', 200],
      ['failure', '/down', 503],
    ]);
  });

  it('holds the failed calls only with PROXY_LOG_SUCCESSES=false, and answers every call alike', async () => {
    const { statuses, logged } = await callsLogged(false);
    expect(statuses).toEqual([200, 503]);
    expect(logged.map((operation) => [operation.status, operation.proxy?.path, operation.proxy?.upstream_status])).toEqual([['failure', '/down', 503]]);
  });
});

describe('what the caller is answered when the provider or the call is out of the ordinary', () => {
  let provider: Server;
  const seen: Array<{ method: string; url: string }> = [];
  let trickleClosedAt: number | undefined;

  beforeAll(async () => {
    provider = createServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '' });
      switch (req.url) {
        case '/see-other':
          return res.writeHead(303, { location: '/target' }).end();
        case '/bad-location':
          return res.writeHead(302, { location: 'http://[' }).end('moved');
        case '/stall':
          // The head and a first chunk, then nothing.
          res.writeHead(200, { 'content-type': 'text/plain' });
          return res.write('first chunk');
        case '/events':
          // A stream of events (server-sent events, a model's tokens): small, slow, long.
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: 1\n\n');
          setTimeout(() => res.end('data: 2\n\n'), 10_000);
          return;
        case '/early-hints':
          // An interim 103 first, then, a moment later, the answer.
          res.writeEarlyHints({ link: '</style.css>; rel=preload' });
          setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain', 'x-final': '1' }).end('final'), 200);
          return;
        case '/early-then-moved':
          res.writeEarlyHints({ link: '</style.css>; rel=preload' });
          setTimeout(() => res.writeHead(303, { location: '/target' }).end(), 200);
          return;
        case '/gzip-events': {
          // The same, compressed: each event flushed through the encoder as it comes.
          res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
          const gzip = createGzip();
          gzip.pipe(res);
          gzip.write('data: 1\n\n');
          gzip.flush();
          setTimeout(() => gzip.end('data: 2\n\n'), 10_000);
          return;
        }
        case '/not-modified':
          return res.writeHead(304, { 'content-encoding': 'gzip', etag: '"v1"' }).end();
        case '/trickle-redirect': {
          // A redirect whose body never ends: a byte every 100 ms.
          res.writeHead(302, { location: '/target', 'content-type': 'text/plain' });
          const trickle = setInterval(() => res.write('.'), 100);
          req.socket.once('close', () => {
            clearInterval(trickle);
            trickleClosedAt = Date.now();
          });
          return;
        }
        case '/interim-forever': {
          // 102 Processing every 100 ms, and never a final answer.
          const interim = setInterval(() => res.writeProcessing(), 100);
          req.socket.once('close', () => clearInterval(interim));
          return;
        }
        default:
          return res.writeHead(200, { 'content-type': 'text/plain' }).end('target');
      }
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    provider.closeAllConnections();
    await new Promise((resolve) => provider.close(resolve));
  });

  /**
   * The upstream timeout of a call: long for the slow streams (10 s between their events), 5 s
   * for the rest, whose timeout is not what is checked (500 ms left the early hints' answer, 200 ms
   * on, a bet on a loaded machine), short for a stalled body. That one must time out before the
   * answer's read-ahead ends (1 s), and undici fires a body timeout up to half a second late (its
   * timers tick every 499 ms): 200 ms, not 500, which lost that race on a loaded machine and
   * answered a stream.
   */
  const timeoutOf = (path: string) => (path === 'events' || path === 'gzip-events' ? 30_000 : path === 'stall' ? 200 : 5_000);

  /** One call through a replica's handler to the provider above: the answer's meta and body. */
  async function answer(path: string, fields: Parameters<typeof proxyMetaFixture>[1] = {}): Promise<{ meta: ProxyReplyMeta; body: string }> {
    const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
    const { port } = provider.address() as AddressInfo;
    const meta = proxyMetaFixture(path, fields);
    cache.set(credentialKey(meta), { id: 'c1', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: `http://127.0.0.1:${port}`, headers: {}, query: {}, decompress: false }, cache.generation());
    const operations = { recordFields: () => undefined };
    const handle = proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: timeoutOf(path), maxRedirects: 3 }, retryCapMs: 100, operations, logSuccesses: true });
    return new Promise((resolve) => {
      void handle({ meta, body: new Uint8Array(0), respond: (reply: ProxyReplyMeta, body: Uint8Array) => resolve({ meta: reply, body: Buffer.from(body).toString() }) });
    });
  }
  const errorCode = (meta: ProxyReplyMeta) => (meta.ok ? undefined : meta.error.code);

  it('refuses a header value the HTTP client would refuse with 400 invalid_headers, before reaching the provider and without retries', async () => {
    seen.length = 0;
    const { meta } = await answer('echo', { headers: [['X-Name', '日本']], retries: 3 });
    expect(errorCode(meta)).toBe('invalid_headers');
    expect(seen).toEqual([]);
  });

  it('follows a 303 for a HEAD with a HEAD', async () => {
    seen.length = 0;
    const { meta } = await answer('see-other', { method: 'HEAD' });
    expect(meta).toMatchObject({ ok: true, status: 200 });
    expect(seen).toEqual([
      { method: 'HEAD', url: '/see-other' },
      { method: 'HEAD', url: '/target' },
    ]);
  });

  it("passes a redirect whose Location is not a URL on as the provider's answer", async () => {
    const { meta, body } = await answer('bad-location');
    expect(meta).toMatchObject({ ok: true, status: 302 });
    expect(body).toBe('moved');
  });

  it('answers 504 upstream_timeout when the body stalls, past the timeout, before the answer is sent', async () => {
    const { meta } = await answer('stall');
    expect(errorCode(meta)).toBe('upstream_timeout');
  });

  it('answers a slow stream as a stream once it has waited a moment, not when the stream ends', async () => {
    // Its end comes 10 s after its head: an answer inline would have waited for it.
    const { meta } = await answer('events');
    expect(meta).toMatchObject({ ok: true, status: 200, body: { stream: expect.any(String) } });
  });

  it('waits past an interim 1xx answer (103 Early Hints) for the final one, whose status, headers and body go back', async () => {
    const { meta, body } = await answer('early-hints');
    expect(meta).toMatchObject({ ok: true, status: 200 });
    expect(meta.ok && meta.headers).toEqual(expect.arrayContaining([['x-final', '1']]));
    expect(body).toBe('final');
    seen.length = 0;
    // The final answer is what is followed, retried or replayed.
    const moved = await answer('early-then-moved');
    expect(moved).toMatchObject({ meta: { ok: true, status: 200 }, body: 'target' });
    expect(seen.map((call) => call.url)).toEqual(['/early-then-moved', '/target']);
  });

  it('answers a slow compressed stream with Decompress as a stream once it has waited a moment, not when the stream ends', async () => {
    const started = Date.now();
    const { meta } = await answer('gzip-events', { decompress: true });
    expect(meta).toMatchObject({ ok: true, status: 200, body: { stream: expect.any(String) } });
    // The read-ahead's second, with room for a loaded machine, and still short of the stream's end (10 s).
    expect(Date.now() - started).toBeLessThan(8_000);
  });

  it('lets a redirect\'s body that never ends go within a second: the provider cannot hold a socket of the replica for each call', async () => {
    const { meta, body } = await answer('trickle-redirect');
    const answeredAt = Date.now();
    expect(meta).toMatchObject({ ok: true, status: 200 });
    expect(body).toBe('target');
    for (let waited = 0; trickleClosedAt === undefined && waited < 5_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(trickleClosedAt).toBeDefined();
    expect(trickleClosedAt! - answeredAt).toBeLessThan(2_000);
  }, 15_000);

  it('waits no longer than the deadline for a final answer behind interim ones that keep coming: 504 upstream_timeout', async () => {
    const { meta } = await answer('interim-forever', { deadline_ms: 500 });
    expect(errorCode(meta)).toBe('upstream_timeout');
  }, 10_000);

  it('passes a 304 on with Decompress, though it names an encoding and has no body to decode', async () => {
    const { meta, body } = await answer('not-modified', { decompress: true });
    expect(meta).toMatchObject({ ok: true, status: 304 });
    expect(body).toBe('');
  });
});

describe("a call near its caller's deadline", () => {
  let provider: Server;
  let busyAttempts = 0;

  beforeAll(async () => {
    provider = createServer((req, res) => {
      // `/busy` asks for a retry in 3 s; `/silent` never answers.
      if (req.url === '/busy') {
        busyAttempts++;
        res.writeHead(503, { 'retry-after': '3' }).end('busy');
      }
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    provider.closeAllConnections();
    await new Promise((resolve) => provider.close(resolve));
  });

  /** One call through a replica whose own limits are far: 30 s per attempt, retries a minute apart at most. */
  async function answer(path: string, fields: Parameters<typeof proxyMetaFixture>[1]): Promise<ProxyReplyMeta> {
    const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
    const { port } = provider.address() as AddressInfo;
    const meta = proxyMetaFixture(path, fields);
    cache.set(credentialKey(meta), { id: 'c1', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: `http://127.0.0.1:${port}`, headers: {}, query: {}, decompress: false }, cache.generation());
    const handle = proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: 30_000, maxRedirects: 0 }, retryCapMs: 60_000, operations: { recordFields: () => undefined }, logSuccesses: true });
    return new Promise((resolve) => void handle({ meta, body: new Uint8Array(0), respond: (reply: ProxyReplyMeta) => resolve(reply) }));
  }

  it('takes no retry whose wait passes the deadline: the provider\'s last answer goes back, and the provider hears nothing more', async () => {
    const reply = await answer('busy', { retries: 3, deadline_ms: 1_000 });
    expect(reply).toMatchObject({ ok: true, status: 503 });
    expect(busyAttempts).toBe(1);
  });

  it('waits for the head of an answer no longer than the deadline: 504 upstream_timeout, not the attempt\'s own 30 s', async () => {
    const reply = await answer('silent', { deadline_ms: 500 });
    expect(reply).toMatchObject({ ok: false, error: { code: 'upstream_timeout' } });
  }, 10_000);
});

describe('a redirect to another origin', () => {
  it('reaches it without the connection\'s credentials; one to the same origin keeps them', async () => {
    const heard: Array<{ url: string; authorization: string | undefined; key: string | undefined }> = [];
    const record = (req: IncomingMessage) =>
      heard.push({ url: req.url ?? '', authorization: req.headers['authorization'] as string | undefined, key: req.headers['x-api-key'] as string | undefined });
    // Another origin: the same host on another port.
    const other = createServer((req, res) => (record(req), res.writeHead(200).end('elsewhere')));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const { port: otherPort } = other.address() as AddressInfo;
    const provider = createServer((req, res) => {
      record(req);
      if (req.url === '/away') return res.writeHead(302, { location: `http://127.0.0.1:${otherPort}/landing` }).end();
      if (req.url === '/home') return res.writeHead(302, { location: '/landed' }).end();
      return res.writeHead(200).end('here');
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = provider.address() as AddressInfo;
      const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
      const credentials = { id: 'c1', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: `http://127.0.0.1:${port}`, headers: { authorization: 'Bearer the-secret', 'x-api-key': 'the-key' }, query: {}, decompress: false };
      const handle = proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: 5_000, maxRedirects: 3 }, retryCapMs: 100, operations: { recordFields: () => undefined }, logSuccesses: true });
      const call = (path: string) => {
        const meta = proxyMetaFixture(path);
        cache.set(credentialKey(meta), credentials, cache.generation());
        return new Promise<ProxyReplyMeta>((resolve) => void handle({ meta, body: new Uint8Array(0), respond: (reply: ProxyReplyMeta) => resolve(reply) }));
      };
      expect(await call('away')).toMatchObject({ ok: true, status: 200 });
      expect(await call('home')).toMatchObject({ ok: true, status: 200 });
      expect(heard).toEqual([
        { url: '/away', authorization: 'Bearer the-secret', key: 'the-key' },
        { url: '/landing', authorization: undefined, key: undefined },
        { url: '/home', authorization: 'Bearer the-secret', key: 'the-key' },
        { url: '/landed', authorization: 'Bearer the-secret', key: 'the-key' },
      ]);
    } finally {
      for (const server of [provider, other]) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });
});

describe('an answer that ended before it was read', () => {
  it('is not complete when it is larger than what the reader asked to hold, so it streams rather than rides in one message past the limit', async () => {
    const provider = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(250 * 1024)));
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = provider.address() as AddressInfo;
      const response = await callUpstream(
        { method: 'GET', url: new URL(`http://127.0.0.1:${port}/large`), headers: [], body: null, secretHeaders: new Set() },
        { policy, dispatcher, timeoutMs: 5_000, maxRedirects: 0 },
      );
      // A busy replica comes to it late: the whole body (under what the upstream side buffers) is in.
      await new Promise((resolve) => setTimeout(resolve, 300));
      // 192 KiB: what rides in a message under a NATS max_payload of 256 KiB.
      const head = await response.readAhead(192 * 1024, 10_000);
      expect(head.complete).toBe(false);
      expect(Buffer.concat(head.chunks).length + (await drain(response))).toBe(250 * 1024);
    } finally {
      provider.closeAllConnections();
      await new Promise((resolve) => provider.close(resolve));
    }
  });
});

async function drain(response: { read(): Promise<Uint8Array | null> }): Promise<number> {
  let bytes = 0;
  for (let chunk = await response.read(); chunk !== null; chunk = await response.read()) bytes += chunk.length;
  return bytes;
}

describe('a streamed request body', () => {
  // The caller's side serves a body over the inline limit until the replica has read it, or
  // cancels it: a call that failed before reaching the provider (an unknown connection) never
  // read it, and the caller's side held it until its idle timeout.
  it('is let go at once when the call fails before the provider was reached', async () => {
    // Served as the gateway serves it, under its own identity.
    const gateway = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('gateway'), logger, requestTimeoutMs: 5_000 });
    const served = servePullStream(gateway, (async function* () {
      yield new Uint8Array(2 * 1024 * 1024);
    })(), { idleTimeoutMs: 20_000 });
    const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
    const operations = { recordFields: () => undefined };
    // No vault answers: the credentials cannot be had.
    const handle = proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: 500, maxRedirects: 0 }, retryCapMs: 100, operations, logSuccesses: true });
    const started = Date.now();
    const reply = await new Promise<ProxyReplyMeta>((resolve) => {
      void handle({ meta: proxyMetaFixture('upload', { method: 'POST', body: { stream: served.inbox } }), body: new Uint8Array(0), respond: (answer: ProxyReplyMeta) => resolve(answer) });
    });
    expect(reply.ok).toBe(false);
    await served.done;
    expect(Date.now() - started).toBeLessThan(10_000);
    await gateway.drain();
  }, 30_000);
});

/**
 * A provider that takes only `Bearer renewed` (never on `/scoped`), and a vault that renews a
 * connection's credentials to that token after `refreshMs`, counting the forced refreshes.
 */
async function renewingVault(refreshMs: number) {
  const provider = createServer((req, res) => {
    const renewed = req.headers.authorization === 'Bearer renewed';
    res.writeHead(req.url !== '/scoped' && renewed ? 200 : 401).end(renewed ? 'ok' : 'refused');
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
  const { port } = provider.address() as AddressInfo;
  const credentialsWith = (token: string) => ({
    id: 'c1',
    provider: 'crm',
    auth_mode: 'OAUTH2',
    expires_at: null,
    base_url: `http://127.0.0.1:${port}`,
    headers: { authorization: `Bearer ${token}` },
    query: {},
    decompress: false,
  });
  let forced = 0;
  vault.serve(proxyContracts.getCredentials, async ({ force_refresh }) => {
    if (force_refresh) forced++;
    await new Promise((resolve) => setTimeout(resolve, refreshMs));
    return credentialsWith('renewed');
  });
  await vault.flush();
  return {
    credentialsWith,
    forcedRefreshes: () => forced,
    close: async () => {
      await vault.close();
      provider.closeAllConnections();
      await new Promise((resolve) => provider.close(resolve));
    },
  };
}

/** A handler with its own credential cache, recording nothing, as a replica's. */
const quietHandler = (cache: CredentialCache) =>
  proxyRequestHandler({ bus, logger, cache, upstream: { policy, dispatcher, timeoutMs: 5_000, maxRedirects: 0 }, retryCapMs: 100, operations: { recordFields: () => undefined }, logSuccesses: true });

describe('a 401 on a connection whose token the vault can renew', () => {
  // Every 401 forced a refresh at the provider's token endpoint, past the vault's back-off: a
  // path that answers 401 whatever the token made each call a refresh.
  it('refreshes by force once in a while, however many calls meet it; calls that met the expired token together all replay with the one refresh', async () => {
    // A refresh takes a moment: the calls that met the 401 together wait for the same one.
    const vault = await renewingVault(100);
    try {
      const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
      const handle = quietHandler(cache);
      const call = (path: string) => new Promise<ProxyReplyMeta>((resolve) => void handle({ meta: proxyMetaFixture(path), body: new Uint8Array(0), respond: (reply: ProxyReplyMeta) => resolve(reply) }));
      cache.set(credentialKey(proxyMetaFixture('any')), vault.credentialsWith('expired'), cache.generation());

      const together = await Promise.all(Array.from({ length: 5 }, () => call('contacts')));
      expect(together.map((reply) => (reply.ok ? reply.status : 0))).toEqual([200, 200, 200, 200, 200]);
      expect(vault.forcedRefreshes()).toBe(1);

      for (let i = 0; i < 10; i++) expect(await call('scoped')).toMatchObject({ ok: true, status: 401 });
      expect(vault.forcedRefreshes()).toBe(1);
    } finally {
      await vault.close();
    }
  }, 30_000);

  // Calls meeting a 401 share one forced refresh, bound by none of their deadlines: a call with
  // little time left waited for it as long as it took, holding its slot past its caller.
  it("answers the 401 once the call's deadline comes, while a slow refresh goes on", async () => {
    const vault = await renewingVault(3_000);
    try {
      const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
      const handle = quietHandler(cache);
      cache.set(credentialKey(proxyMetaFixture('any')), vault.credentialsWith('expired'), cache.generation());
      const started = performance.now();
      const reply = await new Promise<ProxyReplyMeta>((resolve) => void handle({ meta: proxyMetaFixture('contacts', { deadline_ms: 1_000 }), body: new Uint8Array(0), respond: resolve }));
      expect(reply).toMatchObject({ ok: true, status: 401 });
      expect(performance.now() - started).toBeLessThan(2_500);
    } finally {
      await vault.close();
    }
  }, 30_000);
});

describe('credentials that take a refresh to have', () => {
  // A call whose token had expired asked the vault with the bus's 5 s: a refresh waiting for a
  // slow token endpoint (up to REFRESH_TIMEOUT_MS, 10 s) made the call a 503, while the vault
  // stored the new token with nobody waiting, and the gateway would have waited 45 s. The vault
  // says it is at work meanwhile; the call waits for it until its own deadline.
  it('waits for them as long as the call may wait, and never past its deadline', async () => {
    const vault = await renewingVault(6_000);
    try {
      // A cache of its own for each call: both ask the vault.
      const call = (deadlineMs: number) =>
        new Promise<ProxyReplyMeta>((resolve) => void quietHandler(createCredentialCache({ ttlMs: 60_000, maxEntries: 10 }))({ meta: proxyMetaFixture('contacts', { deadline_ms: deadlineMs }), body: new Uint8Array(0), respond: resolve }));
      const started = performance.now();
      const [patient, hurried] = await Promise.all([call(45_000), call(3_000).then((reply) => ({ reply, afterMs: performance.now() - started }))]);
      expect(patient).toMatchObject({ ok: true, status: 200 });
      expect(hurried.reply).toMatchObject({ ok: false });
      expect(hurried.afterMs).toBeLessThan(5_000);
    } finally {
      await vault.close();
    }
  }, 30_000);
});
