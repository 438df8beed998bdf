import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineEvent, defineRequest, STREAMS } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger, currentRequestId, runWithContext } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { batchedPublisher, consume, createBus, ensureStreams, openKv, type Bus } from './index.js';

const echo = defineRequest('test.echo', z.object({ text: z.string() }), z.object({ text: z.string(), requestId: z.string() }));
const fails = defineRequest('test.fails', z.object({ code: z.string() }), z.object({}));
const silent = defineRequest('test.silent', z.object({}), z.object({}));
const happened = defineEvent('test.happened', z.object({ n: z.number() }));

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let server: Bus;
let client: Bus;

beforeAll(async () => {
  nats = await startNats();
  server = await createBus({ servers: nats.url, service: 'server', logger, requestTimeoutMs: 500 });
  client = await createBus({ servers: nats.url, service: 'client', logger, requestTimeoutMs: 500 });
  await ensureStreams(server);
  server.serve(echo, ({ text }) => ({ text, requestId: currentRequestId() ?? '' }));
  server.serve(fails, ({ code }) => {
    if (code === 'boom') throw new Error('secret=hunter2');
    throw new AppError('unknown_connection', 'No such connection');
  });
  // Subscriptions travel to the server asynchronously: make sure they arrived.
  await server.nc.flush();
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

  it('fails with service_unavailable when nobody answers', async () => {
    const started = Date.now();
    await expect(client.request(silent, {})).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(Date.now() - started).toBeLessThan(1500);
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

describe('batched publishing', () => {
  it('sends what one turn queued, in order, and reports a message it cannot send', async () => {
    const received: string[] = [];
    const subscription = client.nc.subscribe('test.batched', { callback: (_error, msg) => received.push(new TextDecoder().decode(msg.data)) });
    await client.nc.flush();
    const publisher = batchedPublisher(server.nc);
    const failures: unknown[] = [];
    for (const text of ['one', 'two', 'three']) publisher.publish('test.batched', new TextEncoder().encode(text));
    publisher.publish('test.batched', new Uint8Array(server.nc.info!.max_payload + 1), undefined, (error) => failures.push(error));
    expect(received).toEqual([]); // nothing leaves before the turn ends
    await server.nc.flush();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(received).toEqual(['one', 'two', 'three']);
    expect(failures).toHaveLength(1);
    subscription.unsubscribe();
  });
});

describe('KV', () => {
  it('creates once and compares-and-sets on revision', async () => {
    const kv = await openKv<{ n: number }>(client, { name: 'test_kv', ttlMs: 60_000 });
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
