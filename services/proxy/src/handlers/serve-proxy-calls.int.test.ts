import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createBus, pullAll, servePullStream, type Bus } from '@latchkey/bus';
import { PROXY_SUBJECT, type ServiceName } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger, currentRequestId, runWithContext } from '@latchkey/logger';
import { callProxy, proxyExchange } from '@latchkey/proxy-hop';
import { eventually, startNats, type TestNats } from '@latchkey/testing';
import { proxyMetaFixture } from '../domain/meta-fixture.js';
import { serveProxyCalls, type IncomingProxyCall } from './serve-proxy-calls.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let caller: Bus;
let replica: Bus;
/** What the replica does with a call; each test sets its own. */
let behaviour: (call: IncomingProxyCall) => void;

const meta = (path: string) => proxyMetaFixture(path, { environment_id: 'env', key_id: 'key', connection_id: 'c1', provider_config_key: 'p1', method: 'POST' });

const login = (service: ServiceName | 'observer') =>
  createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

beforeAll(async () => {
  nats = await startNats();
  // The two ends log in as the services that play them, with their own inboxes, as in production.
  caller = await login('gateway');
  replica = await login('proxy');
  serveProxyCalls(replica, async (call) => behaviour(call), { maxInFlight: 100 });
  await replica.flush();
});

afterAll(async () => {
  await caller?.drain();
  await replica?.drain();
  await nats?.dispose();
});

describe('proxy exchange', () => {
  it('carries the calls of one turn in few messages (within the payload limit, 8 calls at most), each answered with its own body and handled under its request id', async () => {
    behaviour = (call) => call.respond({ ok: true, status: 201, headers: [['x-request-id', currentRequestId() ?? '']], body: 'inline' }, call.body);
    const messages: number[] = [];
    // Only the observer (test servers only) may watch a subject it does not serve.
    const observer = await login('observer');
    const watcher = observer.subscribeRaw(PROXY_SUBJECT, (message) => messages.push(message.data.length));
    await observer.flush();

    // 8 bodies of 200 KiB: more than one message can hold (1 MiB), so two messages; then 16
    // small ones: two more.
    const bodies = [...Array.from({ length: 8 }, (_, n) => Buffer.alloc(200 * 1024, n)), ...Array.from({ length: 16 }, (_, n) => Buffer.from(`small ${n}`))];
    const answers = await Promise.all(
      bodies.map((body, n) => runWithContext({ requestId: `req-${n}` }, () => proxyExchange(caller, meta(`item/${n}`), body, 5_000))),
    );
    answers.forEach((answer, n) => {
      expect(answer.meta).toEqual({ ok: true, status: 201, headers: [['x-request-id', `req-${n}`]], body: 'inline' });
      expect(Buffer.from(answer.body).equals(bodies[n]!)).toBe(true);
    });
    // The observer's copies come on its own connection, which may be read after the replies.
    await eventually(() => (messages.length >= 4 ? true : undefined), 5_000, 'the observer to see the call messages', 20);
    await observer.flush();
    expect(messages).toHaveLength(4);
    expect(Math.max(...messages)).toBeLessThanOrEqual(caller.maxPayload);
    watcher.unsubscribe();
    await observer.close();
  });

  it('answers a call whose meta is not valid with invalid_body', async () => {
    const inbox = caller.newInbox();
    const answered = new Promise<Uint8Array>((resolve) => caller.subscribeRaw(inbox, (message) => resolve(message.data)));
    const text = Buffer.from(JSON.stringify({ method: 'TRACE' }));
    const frame = Buffer.alloc(12 + text.length);
    frame.writeUInt32BE(7, 0);
    frame.writeUInt32BE(text.length, 4);
    text.copy(frame, 8);
    frame.writeUInt32BE(0, 8 + text.length);
    caller.publishRaw(PROXY_SUBJECT, frame, inbox);

    const data = Buffer.from(await answered);
    expect(data.readUInt32BE(0)).toBe(7);
    expect(data.readUInt8(4)).toBe(0);
    const answer = JSON.parse(data.toString('utf8', 9, 9 + data.readUInt32BE(5))) as { ok: boolean; error: { code: string } };
    expect(answer).toMatchObject({ ok: false, error: { code: 'invalid_body' } });
  });

  it('callProxy: a body over the inline limit goes as a stream either way, and an error answer is thrown with its code', async () => {
    const { body: _ignored, ...callMeta } = meta('echo');
    behaviour = (call) => {
      void (async () => {
        if (call.meta.path === 'refused') return call.respond({ ok: false, error: { code: 'upstream_not_allowed', message: 'no' } }, new Uint8Array(0));
        const received = call.meta.body === 'inline' ? Buffer.from(call.body) : await pullAll(replica, call.meta.body.stream, 5_000, 8 * 1024 * 1024);
        const streamed = call.meta.body === 'inline' ? 'inline' : 'stream';
        if (received.length <= replica.inlineLimit) return call.respond({ ok: true, status: 200, headers: [['x-body', streamed]], body: 'inline' }, received);
        const answer = servePullStream(replica, (async function* () { yield received; })(), { idleTimeoutMs: 5_000 });
        call.respond({ ok: true, status: 200, headers: [['x-body', streamed]], body: { stream: answer.inbox } }, new Uint8Array(0));
      })();
    };
    const small = Buffer.alloc(1000, 1);
    const large = Buffer.alloc(caller.inlineLimit + 1, 2);
    const inline = await callProxy(caller, { meta: callMeta, body: small, timeoutMs: 5_000 });
    expect(inline.headers).toEqual([['x-body', 'inline']]);
    expect(Buffer.from(inline.inline!).equals(small)).toBe(true);

    const whole = await callProxy(caller, { meta: callMeta, body: large, timeoutMs: 5_000 });
    expect(whole.headers).toEqual([['x-body', 'stream']]);
    expect(whole.inline).toBeUndefined();
    expect((await whole.read(8 * 1024 * 1024)).equals(large)).toBe(true);

    // A body of unknown length (an HTTP request's chunks), read back chunk by chunk.
    const chunked = await callProxy(caller, { meta: callMeta, body: (async function* () { yield large.subarray(0, 1000); yield large.subarray(1000); })(), timeoutMs: 5_000 });
    const chunks: Uint8Array[] = [];
    for await (const chunk of chunked.chunks()) chunks.push(chunk);
    expect(Buffer.concat(chunks).equals(large)).toBe(true);

    const tooLarge = await callProxy(caller, { meta: callMeta, body: large, timeoutMs: 5_000 });
    await expect(tooLarge.read(1000)).rejects.toMatchObject({ code: 'payload_too_large' });
    await expect(callProxy(caller, { meta: { ...callMeta, path: 'refused' }, body: small, timeoutMs: 5_000 })).rejects.toMatchObject({ code: 'upstream_not_allowed' });
  });

  it('keeps a slow call alive past the silence limit, and gives a call up with 503 when its replica goes away', async () => {
    behaviour = (call) => {
      if (call.meta.path === 'slow') setTimeout(() => call.respond({ ok: true, status: 200, headers: [], body: 'inline' }, new Uint8Array(0)), 4_000);
      // 'lost' is never answered: the replica stops before it would.
    };
    const slow = proxyExchange(caller, meta('slow'), new Uint8Array(0), 30_000);
    expect((await slow).meta).toMatchObject({ ok: true, status: 200 });

    const started = Date.now();
    const lost = proxyExchange(caller, meta('lost'), new Uint8Array(0), 30_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await replica.close();
    await expect(lost).rejects.toMatchObject({ code: 'service_unavailable' } satisfies Partial<AppError>);
    // Given up at the silence limit (3 s), not at the call's 30 s deadline; 5 s left a loaded
    // machine less than 2 s of room.
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 40_000);
});
