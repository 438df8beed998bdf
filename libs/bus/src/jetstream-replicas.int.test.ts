import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { STREAMS } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, ensureStreams, openKv, type Bus } from './index.js';

// The test server is a single node, where only 1 replica exists: these tests show that the
// configured count is what streams and buckets are created with, and that NATS is asked for it.
const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let bus: Bus;

beforeAll(async () => {
  nats = await startNats();
  // The services' 5 s deadline: NATS's refusal comes at once, and 2 s was a bet on a loaded
  // machine for creating every stream.
  bus = await createBus({ servers: nats.url, service: 'replicas', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000, jetstreamReplicas: 1 });
});

afterAll(async () => {
  await bus?.drain();
  await nats?.dispose();
});

describe('JETSTREAM_REPLICAS', () => {
  it('creates every stream and KV bucket with the configured replicas', async () => {
    expect(bus.jetstreamReplicas).toBe(1);
    await ensureStreams(bus);
    await openKv(bus, { name: 'replicas_kv', ttlMs: 60_000 });
    const jsm = await bus.jetstreamManager();
    for (const stream of Object.values(STREAMS)) {
      expect((await jsm.streams.info(stream.name)).config.num_replicas).toBe(1);
    }
    expect((await jsm.streams.info('KV_replicas_kv')).config.num_replicas).toBe(1);
  });

  it('asks NATS for that count: a single server refuses 3', async () => {
    const clustered = await createBus({ servers: nats.url, service: 'replicas-3', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000, jetstreamReplicas: 3 });
    try {
      await expect(openKv(clustered, { name: 'replicas_kv_3', ttlMs: 60_000 })).rejects.toThrow(/replicas/i);
      const jsm = await clustered.jetstreamManager();
      await jsm.streams.delete(STREAMS.events.name);
      await expect(ensureStreams(clustered)).rejects.toThrow(/replicas/i);
    } finally {
      await clustered.drain();
    }
  });
});
