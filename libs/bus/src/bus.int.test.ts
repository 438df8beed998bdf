import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineBroadcast, defineEvent, defineRequest, givenUpContractOf, inboxPrefixOf, natsPasswordVariable, STREAMS, type GivenUpMessage } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger, currentRequestId, runWithContext } from '@latchkey/logger';
import { eventually, startNats, startTcpRelay, type TestNats } from '@latchkey/testing';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { batchedPublisher, consume, consumeBatches, HAND_BACK_WAIT_MS, createBus, ensureStreams, jetStreamPublisher, openKv, type BatchOutcome, type Bus } from './index.js';
import { connectionOf } from './bus-connection.js';

/** The connection behind a bus, for what these tests do beside it. */
const natsOf = (bus: Bus) => connectionOf(bus).nc;

const echo = defineRequest('test.echo', z.object({ text: z.string() }), z.object({ text: z.string(), requestId: z.string() }));
const fails = defineRequest('test.fails', z.object({ code: z.string() }), z.object({}));
const silent = defineRequest('test.silent', z.object({}), z.object({}));
const hangs = defineRequest('test.hangs', z.object({}), z.object({}));
const slow = defineRequest('test.slow', z.object({ ms: z.number() }), z.object({ slept: z.number() }));
const relay = defineRequest('test.relay', z.object({}), z.object({}));
const large = defineRequest('test.large', z.object({ bytes: z.number().int() }), z.object({ text: z.string() }));
const happened = defineEvent('test.happened', z.object({ n: z.number() }));
const counted = defineEvent('test.counted', z.object({ n: z.number() }));
const poisoned = defineEvent('test.poisoned', z.object({ n: z.number() }));
const handedBack = defineEvent('test.handed_back', z.object({ n: z.number() }));
const slowJob = defineEvent('test.slow_job', z.object({ n: z.number() }));
const longJob = defineEvent('test.long_job', z.object({ n: z.number() }));
const slowBatch = defineEvent('test.slow_batch', z.object({ n: z.number() }));
const lateJob = defineEvent('test.late_job', z.object({ n: z.number() }));
const bulky = defineEvent('test.bulky', z.object({ n: z.number(), pad: z.string() }));
const garbled = defineEvent('test.garbled', z.object({ n: z.number() }));
const garbledBatch = defineEvent('test.garbled_batch', z.object({ n: z.number() }));
const followed = defineEvent('test.followed', z.object({ n: z.number() }));
const rescheduled = defineEvent('test.rescheduled', z.object({ n: z.number() }));
const stoppedEarly = defineEvent('test.stopped_early', z.object({ n: z.number() }));
const told = defineBroadcast('test.told', z.object({ n: z.number() }));

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let server: Bus;
let client: Bus;

beforeAll(async () => {
  nats = await startNats();
  // Test subjects belong to no service: both ends log in as the test server's observer, with
  // the services' 5 s deadline. A case that checks a deadline names its own; 500 ms here was a
  // bet on a loaded machine for every stream, consumer and publish (it lost on buckets and 6 MiB).
  const identity = nats.credentials('observer');
  server = await createBus({ servers: nats.url, service: 'server', identity, logger, requestTimeoutMs: 5_000 });
  client = await createBus({ servers: nats.url, service: 'client', identity, logger, requestTimeoutMs: 5_000 });
  await ensureStreams(server);
  server.serve(echo, ({ text }) => ({ text, requestId: currentRequestId() ?? '' }));
  server.serve(fails, ({ code }) => {
    if (code === 'boom') throw new Error('secret=hunter2');
    throw new AppError('unknown_connection', 'No such connection');
  });
  // Subscriptions travel to the server asynchronously: make sure they arrived.
  await natsOf(server).flush();
});

afterAll(async () => {
  await client?.drain();
  await server?.drain();
  await nats?.dispose();
});

describe('request/reply', () => {
  it('validates, answers and carries the request id across the hop', async () => {
    const reply = await runWithContext({ requestId: 'req-42' }, () => client.request(echo, { text: 'hi' }));
    expect(reply).toEqual({ text: 'hi', requestId: 'req-42' });
  });

  it('re-throws the handler error with its code, and hides unknown errors', async () => {
    await expect(client.request(fails, { code: 'known' })).rejects.toMatchObject({ code: 'unknown_connection', status: 404 });
    const hidden = await client.request(fails, { code: 'boom' }).catch((error: AppError) => error);
    expect(hidden).toMatchObject({ code: 'internal_error' });
    expect((hidden as AppError).message).not.toContain('hunter2');
  });

  it('refuses a payload that breaks the contract before sending it', async () => {
    await expect(client.request(echo, { text: 5 } as unknown as { text: string })).rejects.toMatchObject({ code: 'invalid_body' });
  });

  it('answers many requests made in one turn, each with its own reply', async () => {
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, n) => runWithContext({ requestId: `req-${n}` }, () => client.request(echo, { text: `t${n}` }))),
    );
    expect(replies).toEqual(Array.from({ length: 50 }, (_, n) => ({ text: `t${n}`, requestId: `req-${n}` })));
  });

  it('fails with service_unavailable at once when nobody listens, and at the deadline when nobody answers', async () => {
    // A deadline of 10 s, so "at once" is told from it with room on a loaded machine.
    const started = Date.now();
    await expect(client.request(silent, {}, { timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'service_unavailable', message: 'test.silent: no service is answering' });
    expect(Date.now() - started).toBeLessThan(5_000);

    const listener = natsOf(server).subscribe(hangs.subject);
    await natsOf(server).flush();
    const waited = Date.now();
    await expect(client.request(hangs, {}, { timeoutMs: 300 })).rejects.toMatchObject({
      code: 'service_unavailable',
      message: 'test.hangs: no answer within the deadline',
    });
    expect(Date.now() - waited).toBeGreaterThanOrEqual(290);
    listener.unsubscribe();
  });
});

describe('a request whose server is still at work past its timeout', () => {
  // Buses of their own: a 500 ms timeout, and a server that says it is at work every third of it.
  let quick: Bus;
  let worker: Bus;
  beforeAll(async () => {
    const identity = nats.credentials('observer');
    quick = await createBus({ servers: nats.url, service: 'quick', identity, logger, requestTimeoutMs: 500, keepaliveUpToMs: 2_500 });
    worker = await createBus({ servers: nats.url, service: 'worker', identity, logger, requestTimeoutMs: 500 });
    worker.serve(slow, async ({ ms }) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { slept: ms };
    });
    await worker.flush();
  });
  afterAll(async () => {
    await quick?.drain();
    await worker?.drain();
  });

  it('gets its answer, however many timeouts the work takes, up to its bound', async () => {
    await expect(quick.request(slow, { ms: 1_500 })).resolves.toEqual({ slept: 1_500 });
  });

  it('ends at its bound when the work outlasts it', async () => {
    const started = Date.now();
    await expect(quick.request(slow, { ms: 4_000 })).rejects.toMatchObject({ code: 'service_unavailable', message: 'test.slow: no answer within the deadline' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_400);
    expect(Date.now() - started).toBeLessThan(3_900);
  });

  it('ends at its timeout when it names its own, as before', async () => {
    const started = Date.now();
    await expect(quick.request(slow, { ms: 1_500 }, { timeoutMs: 400 })).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(Date.now() - started).toBeLessThan(1_400);
  });

  it('ends at its timeout when the one that took it says nothing (a replica killed with it in hand)', async () => {
    const taker = natsOf(server).subscribe(hangs.subject);
    await natsOf(server).flush();
    try {
      const started = Date.now();
      await expect(quick.request(hangs, {})).rejects.toMatchObject({ code: 'service_unavailable', message: 'test.hangs: no answer within the deadline' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(490);
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      taker.unsubscribe();
    }
  });

  it('is kept alive no longer than its caller waits, however long the handler runs', async () => {
    const nc = natsOf(client);
    const inbox = client.newInbox();
    const started = performance.now();
    const signs: number[] = [];
    let answeredAt = 0;
    const listening = nc.subscribe(inbox, {
      callback: (_error, msg) => {
        if (msg.data.length === 0) signs.push(performance.now() - started);
        else answeredAt = performance.now() - started;
      },
    });
    const headers = natsHeaders();
    headers.set('latchkey-wait', '300/900');
    nc.publish(slow.subject, new TextEncoder().encode(JSON.stringify({ ms: 2_000 })), { reply: inbox, headers });
    try {
      await eventually(() => (answeredAt > 0 ? true : undefined), 5_000, 'the answer');
      expect(signs.length).toBeGreaterThanOrEqual(3);
      // The bound is 900 ms; the handler ran to 2 s.
      expect(Math.max(...signs)).toBeLessThan(1_500);
    } finally {
      listening.unsubscribe();
    }
  });

  it("waits on, when a handler makes it, no further than that handler's own caller", async () => {
    const relaying = await createBus({ servers: nats.url, service: 'relaying', identity: nats.credentials('observer'), logger, requestTimeoutMs: 500, keepaliveUpToMs: 5_000 });
    let nestedMs = 0;
    relaying.serve(relay, async () => {
      const asked = performance.now();
      await relaying.request(slow, { ms: 3_000 }).catch(() => undefined);
      nestedMs = performance.now() - asked;
      return {};
    });
    await relaying.flush();
    try {
      await expect(quick.request(relay, {}, { timeoutMs: 1_200 })).rejects.toMatchObject({ code: 'service_unavailable' });
      await eventually(() => (nestedMs > 0 ? true : undefined), 5_000, 'the relayed request to end');
      // Its own bound was 5 s, and the answer came at 3 s: its caller had stopped waiting at 1.2 s.
      expect(nestedMs).toBeLessThan(2_200);
    } finally {
      await relaying.drain();
    }
  });

  it('waits on no further than its service was told to hurry (as it begins to stop), one in flight then included', async () => {
    const stopping = await createBus({ servers: nats.url, service: 'stopping', identity: nats.credentials('observer'), logger, requestTimeoutMs: 500, keepaliveUpToMs: 5_000 });
    try {
      const inFlight = stopping.request(slow, { ms: 2_000 }).then(
        () => 'answered',
        () => 'gave up',
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = Date.now();
      stopping.hurry(1_500);
      // Within the time it was given: answered.
      await expect(stopping.request(slow, { ms: 600 })).resolves.toEqual({ slept: 600 });
      // Then no further than it (900 ms left), where it would have waited the 3 s out.
      await expect(stopping.request(slow, { ms: 3_000 })).rejects.toMatchObject({ code: 'service_unavailable' });
      expect(Date.now() - started).toBeLessThan(2_800);
      expect(await inFlight).toBe('gave up');
    } finally {
      await stopping.close();
    }
  });

  it('is answered with the reply alone when it did not ask to be kept alive (a requester of an older version)', async () => {
    const answer = await natsOf(client).request(slow.subject, new TextEncoder().encode(JSON.stringify({ ms: 800 })), { timeout: 5_000 });
    expect(JSON.parse(new TextDecoder().decode(answer.data))).toEqual({ ok: true, data: { slept: 800 } });
  });
});

describe('events and consumers', () => {
  it('delivers published events to a durable consumer, retrying retryable failures', async () => {
    const seen: number[] = [];
    let failedOnce = false;
    const running = await consume({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-consumer',
      contract: happened,
      concurrency: 2,
      retryDelayMs: () => 50,
      handler: async ({ n }) => {
        if (n === 2 && !failedOnce) {
          failedOnce = true;
          throw new AppError('service_unavailable', 'try again');
        }
        seen.push(n);
      },
    });
    for (const n of [1, 2, 3]) await client.publish(happened, { n });
    const deadline = Date.now() + 5000;
    while (seen.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await running.stop();
    expect(seen.sort()).toEqual([1, 2, 3]);
    expect(failedOnce).toBe(true);
  });
});

describe('a consumer that stops', () => {
  it('finishes the messages in hand and hands back at once those fetched but not started', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first: number[] = [];
    const second: number[] = [];
    const options = { bus: server, logger, stream: STREAMS.events.name, durable: 'test-handed-back', contract: handedBack, concurrency: 2, ackWaitMs: 30_000 };
    const stopping = await consume({
      ...options,
      handler: async ({ n }) => {
        first.push(n);
        await gate;
      },
    });
    for (let n = 1; n <= 8; n++) await client.publish(handedBack, { n });
    const inHand = Date.now() + 5000;
    while (first.length < 2 && Date.now() < inHand) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(first).toHaveLength(2);
    const stopped = stopping.stop();
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    await stopped;
    // Only the two in hand ran here; the rest go to the next consumer well before the ack wait.
    expect(first).toHaveLength(2);
    const next = await consume({ ...options, handler: async ({ n }) => void second.push(n) });
    const deadline = Date.now() + 5000;
    while (first.length + second.length < 8 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await next.stop();
    expect([...first, ...second].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});

describe('a consumer stopped as it starts', () => {
  it('stops at once, not when its first pull expires', async () => {
    for (const start of [
      () => consume({ bus: server, logger, stream: STREAMS.events.name, durable: 'test-stopped-early', contract: stoppedEarly, concurrency: 2, handler: async () => undefined }),
      () =>
        consumeBatches({
          bus: server,
          logger,
          stream: STREAMS.events.name,
          durable: 'test-stopped-early-batches',
          contract: stoppedEarly,
          batchSize: 4,
          concurrency: 1,
          handler: async (items) => items.map(() => ({ ok: true as const })),
        }),
    ]) {
      const running = await start();
      const stopping = Date.now();
      await running.stop();
      // The first pull is on its way as consume() returns; it waits 30 s for messages.
      expect(Date.now() - stopping).toBeLessThan(5_000);
    }
  });
});

describe('a consumer that stops with long work in hand', () => {
  it('lets handlers finish until handBackAfterMs, then aborts their signal; a message given up for it, or still held HAND_BACK_WAIT_MS later, goes to the next consumer at once, not failed nor given up', async () => {
    const records: GivenUpMessage[] = [];
    const recorder = natsOf(client).subscribe(givenUpContractOf('server').subject, { callback: (_error, msg) => void records.push(msg.json<GivenUpMessage>()) });
    await natsOf(client).flush();
    const runs: Array<{ n: number; consumer: string; deliveries: number }> = [];
    const ends: Array<{ n: number; end: 'finished' | 'abandoned' | 'finished after the signal' }> = [];
    let stopCalled = 0;
    // The ack wait is long: anything that comes back before it was handed back, not timed out.
    const options = { bus: server, logger, stream: STREAMS.events.name, durable: 'test-long-jobs', contract: longJob, concurrency: 4, ackWaitMs: 30_000, heartbeatMs: 1000, handBackAfterMs: 400, retryDelayMs: () => 10_000 };
    const first = await consume({
      ...options,
      handler: async ({ n }, msg, signal) => {
        runs.push({ n, consumer: 'first', deliveries: msg.info.deliveryCount });
        const waitUntilStopped = async () => {
          while (!stopCalled) await new Promise((resolve) => setTimeout(resolve, 10));
        };
        await waitUntilStopped();
        // 1: short work, done within the grace; 2: long work that gives up when asked;
        // 3: work that ignores the signal and finishes soon after (then it is acked, not handed
        // back); 4: work stuck in a call the signal does not stop (handed back without it).
        if (n === 4) {
          await new Promise((resolve) => setTimeout(resolve, 4000));
          ends.push({ n, end: 'finished' });
          return;
        }
        if (n === 1) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          ends.push({ n, end: 'finished' });
          return;
        }
        if (n === 2) {
          await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
          ends.push({ n, end: 'abandoned' });
          return;
        }
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        await new Promise((resolve) => setTimeout(resolve, 100));
        ends.push({ n, end: 'finished after the signal' });
      },
    });
    for (const n of [1, 2, 3, 4]) await client.publish(longJob, { n });
    const inHand = Date.now() + 5000;
    while (runs.length < 4 && Date.now() < inHand) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toHaveLength(4);
    const stoppedAt = Date.now();
    stopCalled = stoppedAt;
    await first.stop();
    const stopMs = Date.now() - stoppedAt;
    // The grace, then at most HAND_BACK_WAIT_MS for the stuck one.
    expect(stopMs).toBeGreaterThanOrEqual(400 + HAND_BACK_WAIT_MS - 10);
    expect(stopMs).toBeLessThan(400 + HAND_BACK_WAIT_MS + 1000);
    expect(ends).toEqual([{ n: 1, end: 'finished' }, { n: 3, end: 'finished after the signal' }]);

    const second = await consume({
      ...options,
      handler: async ({ n }, msg) => void runs.push({ n, consumer: 'second', deliveries: msg.info.deliveryCount }),
    });
    const deadline = Date.now() + 5000;
    while (runs.length < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    // The stuck handler ends meanwhile; its late success is not acknowledged (the message was handed back).
    while (ends.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setTimeout(resolve, 300)); // nothing else comes back
    await second.stop();
    // Only the abandoned and the stuck ones came back, at once (not after the 10 s retry delay nor the ack wait).
    expect(runs.filter((run) => run.consumer === 'second').sort((a, b) => a.n - b.n)).toEqual([
      { n: 2, consumer: 'second', deliveries: 2 },
      { n: 4, consumer: 'second', deliveries: 2 },
    ]);
    expect(Date.now() - stoppedAt).toBeLessThan(8000);
    expect(records.filter((record) => record.durable === 'test-long-jobs')).toEqual([]);
    recorder.unsubscribe();
  }, 20_000);
});

describe('two replicas whose work outlasts the ack wait', () => {
  it('run each message once: a busy replica holds no message it has not started', async () => {
    // Each run takes longer than the ack wait; the heartbeat keeps a running message, but a
    // message waiting in a replica's buffer would be handed to the other and then run twice.
    const runs: Array<{ n: number; replica: string; deliveries: number }> = [];
    const options = { logger, stream: STREAMS.events.name, durable: 'test-slow-jobs', contract: slowJob, concurrency: 2, ackWaitMs: 1000, heartbeatMs: 250 };
    const replica = (bus: Bus, name: string) =>
      consume({
        ...options,
        bus,
        handler: async ({ n }, msg) => {
          runs.push({ n, replica: name, deliveries: msg.info.deliveryCount });
          await new Promise((resolve) => setTimeout(resolve, 1500));
        },
      });
    const first = await replica(server, 'a');
    const second = await replica(client, 'b');
    for (let n = 1; n <= 12; n++) await client.publish(slowJob, { n });
    const deadline = Date.now() + 20_000;
    while (new Set(runs.map((run) => run.n)).size < 12 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    // Anything more would be a message run again after its ack wait.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await Promise.all([first.stop(), second.stop()]);
    expect(runs.map((run) => run.n).sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, index) => index + 1));
    expect(runs.every((run) => run.deliveries === 1)).toBe(true);
    // Both replicas took a share.
    expect(new Set(runs.map((run) => run.replica))).toEqual(new Set(['a', 'b']));
  }, 40_000);
});

describe('a consumer that names no heartbeat', () => {
  it('keeps a message its handler works on past the ack wait, rather than having it run twice', async () => {
    const runs: Array<{ n: number; deliveries: number }> = [];
    const consumer = await consume({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-no-heartbeat',
      deliverPolicy: 'new',
      contract: slowJob,
      concurrency: 2,
      ackWaitMs: 1000,
      handler: async ({ n }, msg) => {
        runs.push({ n, deliveries: msg.info.deliveryCount });
        await new Promise((resolve) => setTimeout(resolve, 2500));
      },
    });
    await client.publish(slowJob, { n: 100 });
    const deadline = Date.now() + 10_000;
    while (runs.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    // Past the handler's end and more than one ack wait after: a second run would be here.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    await consumer.stop();
    expect(runs).toEqual([{ n: 100, deliveries: 1 }]);
  }, 30_000);
});

describe('a consumer whose pulls go unanswered for a while', () => {
  it('does not give up a pull the server still holds, so what it delivers there is run at once', async () => {
    // A starved server answers a pull late: neither its messages nor its heartbeats reach the
    // client for seconds. A client that gives the pull up meanwhile no longer listens when the
    // server's delivery into it arrives, and the message waits out its ack wait (on a loaded
    // machine, a router's deliveries came back ten times over and its queue stalled).
    const relay = await startTcpRelay({ port: Number(new URL(nats.url).port) });
    const far = await createBus({ servers: `nats://127.0.0.1:${relay.port}`, service: 'far', identity: nats.credentials('observer'), logger, requestTimeoutMs: 500 });
    const runs: Array<{ n: number; deliveries: number; at: number }> = [];
    const running = await consume({
      bus: far,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-late-jobs',
      contract: lateJob,
      deliverPolicy: 'new',
      concurrency: 4,
      ackWaitMs: 20_000,
      handler: async ({ n }, msg) => {
        runs.push({ n, deliveries: msg.info.deliveryCount, at: Date.now() });
      },
    });
    try {
      await client.publish(lateJob, { n: 1 });
      const first = Date.now() + 5000;
      while (runs.length < 1 && Date.now() < first) await new Promise((resolve) => setTimeout(resolve, 50));
      // What the server sends the consumer arrives 8 s late; a job is published meanwhile.
      relay.holdReplies();
      await new Promise((resolve) => setTimeout(resolve, 500));
      await client.publish(lateJob, { n: 2 });
      await new Promise((resolve) => setTimeout(resolve, 7500));
      const released = Date.now();
      relay.releaseReplies();
      const deadline = released + 15_000;
      while (runs.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(runs.map(({ n, deliveries }) => ({ n, deliveries }))).toEqual([
        { n: 1, deliveries: 1 },
        { n: 2, deliveries: 1 },
      ]);
      expect(runs[1]!.at - released).toBeLessThan(3000);
    } finally {
      await running.stop();
      await far.drain();
      await relay.close();
    }
  }, 60_000);
});

describe('messages that always fail', () => {
  it('are given up after the delivery cap, or at once on a final error or a malformed payload, and recorded without their payload', async () => {
    const records: GivenUpMessage[] = [];
    const recorder = await consume({
      bus: client,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-given-up',
      contract: givenUpContractOf('server'),
      concurrency: 4,
      deliverPolicy: 'new',
      handler: async (record) => {
        records.push(record);
      },
    });
    const attempts = new Map<number, number>();
    const running = await consume({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-poisoned',
      contract: poisoned,
      concurrency: 4,
      retryDelayMs: () => 20,
      maxDeliveries: 3,
      handler: async ({ n }) => {
        attempts.set(n, (attempts.get(n) ?? 0) + 1);
        // 1: retryable for ever (an internal error with a secret in it); 2: final at once.
        if (n === 1) throw new Error('password=hunter2');
        throw new AppError('unknown_connection', 'No such connection');
      },
    });
    await client.publish(poisoned, { n: 1 });
    await client.publish(poisoned, { n: 2 });
    await natsOf(client).request(`${poisoned.subject}`, new TextEncoder().encode('{"n":"not a number"}')).catch(() => undefined);
    const deadline = Date.now() + 10_000;
    while (records.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    // Anything more would be a redelivery past the cap.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await running.stop();
    await recorder.stop();

    expect(attempts).toEqual(new Map([[1, 3], [2, 1]]));
    const byReason = Object.fromEntries(records.map((record) => [record.reason, record]));
    expect(Object.keys(byReason).sort()).toEqual(['delivery_cap', 'final_error', 'malformed']);
    expect(byReason['delivery_cap']).toMatchObject({ service: 'server', stream: 'EVENTS', durable: 'test-poisoned', subject: poisoned.subject, deliveries: 3, error: { code: 'internal_error' } });
    expect(byReason['final_error']).toMatchObject({ deliveries: 1, error: { code: 'unknown_connection', message: 'No such connection' } });
    expect(byReason['malformed']).toMatchObject({ deliveries: 1, error: { code: 'invalid_body' } });
    expect(JSON.stringify(records)).not.toContain('hunter2');
  });
});

describe('messages whose handler asks for them again', () => {
  it('come back after the delay asked for, and at the delivery cap are given up and recorded as any other failure', async () => {
    const given: GivenUpMessage[] = [];
    const recorder = natsOf(client).subscribe(givenUpContractOf('server').subject, {
      callback: (_error, msg) => {
        const record = msg.json<GivenUpMessage>();
        if (record.durable === 'test-rescheduled') given.push(record);
      },
    });
    await natsOf(client).flush();
    let deliveries = 0;
    const running = await consume({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-rescheduled',
      contract: rescheduled,
      deliverPolicy: 'new',
      concurrency: 2,
      maxDeliveries: 3,
      handler: async () => {
        deliveries += 1;
        return { retryInMs: 20 };
      },
    });
    try {
      await client.publish(rescheduled, { n: 1 });
      await eventually(() => (given.length > 0 ? given : undefined), 10_000, 'a given-up record');
      // Anything more would be a delivery past the cap (JetStream's own stops at 3 + 5).
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(deliveries).toBe(3);
      expect(given).toEqual([expect.objectContaining({ reason: 'delivery_cap', deliveries: 3, subject: rescheduled.subject, error: expect.objectContaining({ code: 'service_unavailable' }) })]);
      const jsm = await server.jetstreamManager();
      expect(await jsm.consumers.info(STREAMS.events.name, 'test-rescheduled')).toMatchObject({ num_ack_pending: 0, num_pending: 0 });
    } finally {
      await running.stop();
      recorder.unsubscribe();
    }
  });
});

describe('messages that are not JSON at all', () => {
  /** Stores `bytes` on the EVENTS stream as they are, and returns their stream sequence. */
  const storeRaw = async (subject: string, bytes: string) => {
    // Waits for JetStream's acknowledgement as the buses do (nats.js's own default is 1 s).
    const ack = await natsOf(client).request(subject, new TextEncoder().encode(bytes), { timeout: 5_000 });
    return ack.json<{ seq: number }>().seq;
  };
  /** Collects what this service records as given up by `durable`. */
  const givenUpBy = async (durable: string) => {
    const records: GivenUpMessage[] = [];
    const subscription = natsOf(client).subscribe(givenUpContractOf('server').subject, {
      callback: (_error, msg) => {
        const record = msg.json<GivenUpMessage>();
        if (record.durable === durable) records.push(record);
      },
    });
    await natsOf(client).flush();
    return { records, stop: () => subscription.unsubscribe() };
  };
  /** Waits until the durable holds nothing unsettled: a message never settled would stay pending. */
  const settledAll = async (durable: string) => {
    const jsm = await server.jetstreamManager();
    return eventually(
      async () => {
        const info = await jsm.consumers.info(STREAMS.events.name, durable);
        return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
      },
      10_000,
      `${durable} to settle every message`,
    );
  };

  it('are terminated and recorded as malformed by a consumer, which goes on handling the others once', async () => {
    const given = await givenUpBy('test-garbled');
    const handled: number[] = [];
    const running = await consume({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-garbled',
      contract: garbled,
      deliverPolicy: 'new',
      concurrency: 4,
      ackWaitMs: 1_000,
      handler: async ({ n }) => void handled.push(n),
    });
    try {
      await client.publish(garbled, { n: 1 });
      const seq = await storeRaw(garbled.subject, 'not json');
      await client.publish(garbled, { n: 2 });
      await eventually(() => (handled.length >= 2 && given.records.length >= 1 ? true : undefined), 10_000, 'both valid messages handled and the bad one recorded');
      const info = await settledAll('test-garbled');
      // Past the ack wait: a message left unsettled would have come back by now.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(handled.sort()).toEqual([1, 2]);
      expect(given.records).toEqual([expect.objectContaining({ reason: 'malformed', stream_seq: seq, deliveries: 1, error: expect.objectContaining({ code: 'invalid_body' }) })]);
      expect(info.num_redelivered).toBe(0);
      expect(JSON.stringify(given.records)).not.toContain('not json');
    } finally {
      given.stop();
      await running.stop();
    }
  });

  it('are terminated and recorded as malformed by a batch consumer, and the rest of their batch is handled once', async () => {
    const given = await givenUpBy('test-garbled-batches');
    const handled: number[] = [];
    const running = await consumeBatches({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-garbled-batches',
      contract: garbledBatch,
      deliverPolicy: 'new',
      batchSize: 10,
      concurrency: 1,
      ackWaitMs: 1_000,
      handler: async (items) => {
        for (const { payload } of items) handled.push(payload.n);
        return items.map((): BatchOutcome => ({ ok: true }));
      },
    });
    try {
      // Stored together, so they arrive together and share a batch.
      const [, seq] = await Promise.all([client.publish(garbledBatch, { n: 1 }), storeRaw(garbledBatch.subject, 'not json'), client.publish(garbledBatch, { n: 2 })]);
      await eventually(() => (handled.length >= 2 && given.records.length >= 1 ? true : undefined), 10_000, 'both valid messages handled and the bad one recorded');
      const info = await settledAll('test-garbled-batches');
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(handled.sort()).toEqual([1, 2]);
      expect(given.records).toEqual([expect.objectContaining({ reason: 'malformed', stream_seq: seq, deliveries: 1 })]);
      expect(info.num_redelivered).toBe(0);
    } finally {
      given.stop();
      await running.stop();
    }
  });
});

describe('a listener that throws, or is handed bytes that are not JSON', () => {
  it('does not stop its connection: the bus still answers a request at once', async () => {
    // nats.js runs these callbacks inside its read loop: an exception escaping one would end
    // the loop, and the connection would read nothing more until it reconnected seconds later.
    const listener = await createBus({ servers: nats.url, service: 'listener', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    try {
      const heard: string[] = [];
      listener.follow(followed, () => {
        heard.push('follow');
        throw new Error('a follower failed');
      });
      listener.onBroadcast(told, () => void heard.push('broadcast'));
      listener.subscribeRaw('test.raw', () => {
        heard.push('raw');
        throw new Error('a raw handler failed');
      });
      await listener.flush();
      await client.publish(followed, { n: 1 });
      client.publishRaw(told.subject, new TextEncoder().encode('not json'));
      client.publishRaw('test.raw', new TextEncoder().encode('x'));
      await client.flush();
      await eventually(() => (heard.includes('follow') && heard.includes('raw') ? true : undefined), 5_000, 'the listeners to be called');
      // Well under the 20 s or more a stalled connection takes to notice and reconnect.
      const reply = await listener.request(echo, { text: 'still here' }, { timeoutMs: 5_000 });
      expect(reply.text).toBe('still here');
      expect(heard).not.toContain('broadcast');
    } finally {
      await listener.close();
    }
  });
});

describe('a bus that drains while a reply too large for one message is on its way', () => {
  it('serves the whole reply before it closes', async () => {
    const draining = await createBus({ servers: nats.url, service: 'draining', identity: nats.credentials('observer'), logger, requestTimeoutMs: 10_000 });
    let started!: () => void;
    const handling = new Promise<void>((resolve) => (started = resolve));
    draining.serve(large, async ({ bytes }) => {
      started();
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { text: 'x'.repeat(bytes) };
    });
    await draining.flush();
    const bytes = client.maxPayload + 1;
    const answer = client.request(large, { bytes }, { timeoutMs: 10_000 }).catch((error: unknown) => error);
    await handling;
    await draining.drain();
    const whole = await answer;
    expect(whole).not.toBeInstanceOf(Error);
    expect((whole as { text: string }).text).toHaveLength(bytes);
  });
});

describe('JetStream publishing', () => {
  it('resolves once stored, many in one turn, carrying the request id; a repeated msgId is stored once', async () => {
    const jsm = await client.jetstreamManager();
    const before = (await jsm.streams.info(STREAMS.events.name)).state.messages;
    await runWithContext({ requestId: 'publish-trace' }, async () => {
      await Promise.all(Array.from({ length: 200 }, (_, n) => client.publish(counted, { n })));
      await client.publish(counted, { n: 1000 }, { msgId: 'once' });
      await client.publish(counted, { n: 1000 }, { msgId: 'once' });
    });
    expect((await jsm.streams.info(STREAMS.events.name)).state.messages - before).toBe(201);
    const last = await jsm.streams.getMessage(STREAMS.events.name, { last_by_subj: counted.subject });
    expect(last?.header.get('x-request-id')).toBe('publish-trace');
  });

  it('refuses a payload that breaks its contract before sending it', async () => {
    await expect(client.publish(counted, { n: 'one' } as never)).rejects.toMatchObject({ code: 'invalid_body' });
  });

  it('refuses a message larger than the server takes as payload_too_large, never as the bus being away (which is retried)', async () => {
    const error = await client.publish(bulky, { n: 1, pad: 'x'.repeat(client.maxPayload + 1) }, { retryForMs: 2_000 }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'payload_too_large' });
  });

  it('rejects a message no stream takes, and one not acknowledged within the deadline', async () => {
    const publisher = jetStreamPublisher(natsOf(client), 300);
    await expect(publisher.publish('nowhere.at.all', new Uint8Array(1), natsHeaders())).rejects.toThrow(/503/);
    // A plain subscriber that never answers stands in for a JetStream that does not acknowledge.
    const silentSubscriber = natsOf(server).subscribe('test.unacknowledged');
    await natsOf(server).flush();
    const started = Date.now();
    await expect(publisher.publish('test.unacknowledged', new Uint8Array(1), natsHeaders())).rejects.toThrow(/deadline/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    silentSubscriber.unsubscribe();
  });
});

describe('batch consumers', () => {
  it('hand over what arrived together, ack each success, retry a retryable failure and terminate a final one', async () => {
    const batches: number[][] = [];
    const handled = new Map<number, number>();
    const running = await consumeBatches({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-batches',
      contract: counted,
      deliverPolicy: 'new',
      batchSize: 50,
      concurrency: 1,
      retryDelayMs: () => 50,
      handler: async (items) => {
        batches.push(items.map((item) => item.payload.n));
        return items.map(({ payload: { n } }): BatchOutcome => {
          handled.set(n, (handled.get(n) ?? 0) + 1);
          if (n === 7 && handled.get(n) === 1) return { ok: false, error: new AppError('service_unavailable', 'try again') };
          if (n === 8) return { ok: false, error: new AppError('invalid_body', 'never valid') };
          return { ok: true };
        });
      },
    });
    await Promise.all(Array.from({ length: 120 }, (_, n) => client.publish(counted, { n })));
    const deadline = Date.now() + 5000;
    while ((handled.get(7) ?? 0) < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setTimeout(resolve, 200)); // nothing else comes back
    await running.stop();
    expect(Math.max(...batches.map((batch) => batch.length))).toBeGreaterThan(1);
    expect(Math.max(...batches.map((batch) => batch.length))).toBeLessThanOrEqual(50);
    expect([...handled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 120 }, (_, n) => n));
    expect([...handled].filter(([, times]) => times !== 1)).toEqual([[7, 2]]);
  });
});

describe('a batch consumer of large messages', () => {
  it('holds at most maxHeldBytes of them, however deep the backlog, and still handles each once', async () => {
    // 60 messages of 100 KiB wait; the consumer may hold 2 MiB: about 20 of them, not the 100
    // its unacknowledged bound would let it take. What JetStream counts as delivered and not yet
    // acknowledged is what this replica holds in memory.
    const pad = 'x'.repeat(100 * 1024);
    const handled = new Map<number, number>();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const firstBatch = new Promise<void>((resolve) => (entered = resolve));
    // Stored with the services' 5 s deadline (6 MiB at once outlasted the 500 ms `client` had on a loaded machine).
    const publisher = await createBus({ servers: nats.url, service: 'publisher', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    await Promise.all(Array.from({ length: 60 }, (_, n) => publisher.publish(bulky, { n, pad }))).finally(() => publisher.drain());
    const running = await consumeBatches({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-bulky',
      contract: bulky,
      batchSize: 50,
      concurrency: 1,
      maxHeldBytes: 2 * 1024 * 1024,
      handler: async (items) => {
        entered();
        await released;
        for (const { payload } of items) handled.set(payload.n, (handled.get(payload.n) ?? 0) + 1);
        return items.map((): BatchOutcome => ({ ok: true }));
      },
    });
    try {
      await firstBatch;
      const jsm = await server.jetstreamManager();
      // Give a consumer that pulls past its bound the time to do it.
      let mostHeld = 0;
      for (let look = 0; look < 10; look++) {
        mostHeld = Math.max(mostHeld, (await jsm.consumers.info(STREAMS.events.name, 'test-bulky')).num_ack_pending);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(mostHeld).toBeGreaterThan(0);
      expect(mostHeld).toBeLessThanOrEqual(20);
      release();
      const deadline = Date.now() + 10_000;
      while (handled.size < 60 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect([...handled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, n) => n));
      expect([...handled.values()].every((times) => times === 1)).toBe(true);
    } finally {
      release();
      await running.stop();
    }
  });
});

describe('a batch consumer whose batches outlast the ack wait', () => {
  it('runs each message once: neither a running batch nor one waiting its turn is handed over again', async () => {
    // Each batch takes longer than the ack wait, and a batch waits for the one before it: both
    // are held by this live replica, so JetStream must not hand them over again.
    const runs: Array<{ n: number; deliveries: number }> = [];
    const running = await consumeBatches({
      bus: server,
      logger,
      stream: STREAMS.events.name,
      durable: 'test-slow-batches',
      contract: slowBatch,
      deliverPolicy: 'new',
      batchSize: 5,
      concurrency: 1,
      ackWaitMs: 1000,
      handler: async (items) => {
        for (const { payload, msg } of items) runs.push({ n: payload.n, deliveries: msg.info.deliveryCount });
        await new Promise((resolve) => setTimeout(resolve, 1500));
        return items.map((): BatchOutcome => ({ ok: true }));
      },
    });
    await Promise.all(Array.from({ length: 15 }, (_, n) => client.publish(slowBatch, { n })));
    const deadline = Date.now() + 20_000;
    while (new Set(runs.map((run) => run.n)).size < 15 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    // Anything more would be a message run again after its ack wait.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await running.stop();
    expect(runs.map((run) => run.n).sort((a, b) => a - b)).toEqual(Array.from({ length: 15 }, (_, n) => n));
    expect(runs.filter((run) => run.deliveries !== 1)).toEqual([]);
  }, 40_000);
});

describe('replies larger than a NATS message', () => {
  it('arrive whole (as a pull stream) and quickly; past maxReplyBytes they are payload_too_large at once', async () => {
    // Timeouts far above the bound: waiting on either one would fail it, a loaded machine would not.
    const bounded = await createBus({ servers: nats.url, service: 'bounded', identity: nats.credentials('observer'), logger, requestTimeoutMs: 10_000, maxReplyBytes: 2 * 1024 * 1024 });
    try {
      bounded.serve(large, ({ bytes }) => ({ text: 'x'.repeat(bytes) }));
      await bounded.flush();
      const maxPayload = client.maxPayload;
      const started = Date.now();
      const whole = await client.request(large, { bytes: maxPayload + 1 }, { timeoutMs: 10_000 });
      expect(whole.text).toHaveLength(maxPayload + 1);
      const tooLarge = await client.request(large, { bytes: 3 * 1024 * 1024 }, { timeoutMs: 10_000 }).catch((error: AppError) => error);
      expect(tooLarge).toMatchObject({ code: 'payload_too_large' });
      expect(Date.now() - started).toBeLessThan(5_000);
      // Small replies still travel inline.
      expect(await client.request(large, { bytes: 10 })).toEqual({ text: 'x'.repeat(10) });
    } finally {
      await bounded.drain();
    }
  });
});

describe('batched publishing', () => {
  it('sends what one turn queued, in order, and reports a message it cannot send', async () => {
    const received: string[] = [];
    const subscription = natsOf(client).subscribe('test.batched', { callback: (_error, msg) => void received.push(new TextDecoder().decode(msg.data)) });
    await natsOf(client).flush();
    const publisher = batchedPublisher(natsOf(server));
    const failures: unknown[] = [];
    for (const text of ['one', 'two', 'three']) publisher.publish('test.batched', new TextEncoder().encode(text));
    publisher.publish('test.batched', new Uint8Array(natsOf(server).info!.max_payload + 1), undefined, (error) => failures.push(error));
    expect(received).toEqual([]); // nothing leaves before the turn ends
    await natsOf(server).flush();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(received).toEqual(['one', 'two', 'three']);
    expect(failures).toHaveLength(1);
    subscription.unsubscribe();
  });
});

describe('KV', () => {
  // Two replicas with the services' default deadline: the 500 ms the buses above once had ran
  // out creating buckets on a loaded machine.
  let first: Bus;
  let second: Bus;
  beforeAll(async () => {
    const identity = nats.credentials('observer');
    const replica = (service: string) => createBus({ servers: nats.url, service, identity, logger, requestTimeoutMs: 5_000 });
    [first, second] = await Promise.all([replica('first'), replica('second')]);
  });
  afterAll(async () => {
    await Promise.all([first?.drain(), second?.drain()]);
  });

  it('opens a new bucket from many replicas at once', async () => {
    for (let round = 0; round < 5; round++) {
      const name = `test_concurrent_${round}`;
      const views = await Promise.all(Array.from({ length: 6 }, () => openKv<{ n: number }>(round % 2 ? second : first, { name, ttlMs: 60_000 })));
      expect(await views[0]!.create('k', { n: round })).not.toBeNull();
      expect((await views[5]!.get('k'))?.value).toEqual({ n: round });
    }
  });

  it('creates once and compares-and-sets on revision', async () => {
    const kv = await openKv<{ n: number }>(second, { name: 'test_kv', ttlMs: 60_000 });
    const first = await kv.create('k', { n: 1 });
    expect(first).not.toBeNull();
    expect(await kv.create('k', { n: 2 })).toBeNull();
    const entry = await kv.get('k');
    expect(entry?.value).toEqual({ n: 1 });
    expect(await kv.update('k', { n: 3 }, entry!.revision)).not.toBeNull();
    expect(await kv.update('k', { n: 4 }, entry!.revision)).toBeNull();
    expect((await kv.get('k'))?.value).toEqual({ n: 3 });
  });
});

describe('a subscription NATS refuses', () => {
  it('is reported, so the service is not ready, rather than never delivering in silence', async () => {
    // The proxy's identity may not read this subject: as when the permissions file is out of step with the code.
    const restricted = await createBus({ servers: nats.url, service: 'proxy', identity: nats.credentials('proxy'), logger, requestTimeoutMs: 5_000 });
    try {
      expect(restricted.refusedSubscriptions()).toEqual([]);
      restricted.onBroadcast(told, () => undefined);
      await restricted.flush();
      await eventually(() => (restricted.refusedSubscriptions().length > 0 ? true : undefined), 5_000, 'the refusal to be reported', 50);
      expect(restricted.refusedSubscriptions()).toEqual(['test.told']);
      // The connection itself is fine.
      expect(restricted.isConnected()).toBe(true);
    } finally {
      await restricted.close();
    }
  });

  it('is made again once NATS allows it, without a reconnect or a restart, and then delivers', async () => {
    // An upgrade that adds a subject: this replica subscribed before NATS reloaded the
    // authorization that allows it. `proxy` may read its inbox and `subjects`; `observer` anything.
    const authorization = (subjects: string[]) =>
      [
        'authorization {',
        '  users = [',
        `    { user: "observer", password: $${natsPasswordVariable('observer')}, permissions: { publish: { allow: [">"] }, subscribe: { allow: [">"] } } }`,
        `    { user: "proxy", password: $${natsPasswordVariable('proxy')}, permissions: { publish: { allow: [">"] }, subscribe: { allow: ${JSON.stringify([`${inboxPrefixOf('proxy')}.>`, ...subjects])} } } }`,
        '  ]',
        '}',
      ].join('\n');
    const upgraded = await startNats({ authorization: authorization([]) });
    const teller = await createBus({ servers: upgraded.url, service: 'teller', identity: upgraded.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    const restricted = await createBus({ servers: upgraded.url, service: 'proxy', identity: upgraded.credentials('proxy'), logger, requestTimeoutMs: 5_000 });
    try {
      let reconnects = 0;
      restricted.onReconnect(() => reconnects++);
      const heard: number[] = [];
      restricted.onBroadcast(told, ({ n }) => void heard.push(n));
      await eventually(() => (restricted.refusedSubscriptions().length > 0 ? true : undefined), 5_000, 'the refusal to be reported', 50);

      await upgraded.reload(authorization([told.subject]));
      await eventually(() => (restricted.refusedSubscriptions().length === 0 ? true : undefined), 40_000, 'the subscription to be made again', 100);
      expect(reconnects).toBe(0);
      await eventually(
        () => {
          teller.broadcast(told, { n: 7 });
          return heard.length > 0 ? heard : undefined;
        },
        5_000,
        'the broadcast to arrive',
        200,
      );
      expect(heard[0]).toBe(7);
    } finally {
      await Promise.all([restricted.close(), teller.close()]);
      await upgraded.dispose();
    }
  }, 60_000);
});
