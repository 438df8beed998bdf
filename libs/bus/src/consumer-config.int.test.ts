import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nanos } from '@nats-io/transport-node';
import { z } from 'zod';
import { defineEvent, type NatsIdentityName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { natsServerBinary, startNats, startNatsCluster, type NatsCredentials } from '@latchkey/testing';
import { consume, consumeBatches, createBus, type Bus, type ConsumeOptions } from './index.js';

// A durable's settings come from the code and the service's configuration (WEBHOOK_TIMEOUT_MS,
// WEBHOOK_MAX_ACK_PENDING, WEBHOOK_RETRY_HOURS), and change with them. Since 2.10, NATS refuses
// to create a durable that exists with other settings (10148, "consumer already exists"), where
// 2.9 (Debian's, which the other tests run) quietly updated it: these tests run the recent
// nats-server of `make nats-server`, as deployments do, alone and as a cluster (the server checks
// in another place for each).
const binary = natsServerBinary();
const recentServer = existsSync(binary);
if (!recentServer) {
  console.warn(`consumer-config.int.test.ts: skipped, no recent nats-server at ${binary} (make nats-server builds one; NATS_SERVER_BIN names another)`);
}

const configured = defineEvent('test.configured', z.object({ n: z.number() }));
const STREAM = 'CONSUMER_CONFIG';
const logger = createLogger({ service: 'test', silent: true });

interface Server {
  url: string;
  credentials(identity: NatsIdentityName): NatsCredentials;
  dispose(): Promise<void>;
}

const servers: Array<[string, () => Promise<Server>]> = [
  // startNats runs NATS_SERVER_BIN when no Docker answers (a container of nats:2.10 when one does).
  ['a single nats-server', () => startNats()],
  ['a three-node cluster', () => startNatsCluster()],
];

(recentServer ? describe.each(servers) : describe.skip.each(servers))('a durable consumer on %s', (_name, start) => {
  let server: Server;
  let bus: Bus;
  const previousBinary = process.env['NATS_SERVER_BIN'];

  beforeAll(async () => {
    process.env['NATS_SERVER_BIN'] = binary;
    server = await start();
    bus = await createBus({ servers: server.url, service: 'server', identity: server.credentials('observer'), logger, requestTimeoutMs: 5_000, jetstreamSetupTimeoutMs: 30_000 });
    const jsm = await bus.jetstreamManager();
    await jsm.streams.add({ name: STREAM, subjects: [configured.subject], num_replicas: 1 });
  }, 60_000);

  afterAll(async () => {
    if (previousBinary === undefined) delete process.env['NATS_SERVER_BIN'];
    else process.env['NATS_SERVER_BIN'] = previousBinary;
    await bus?.drain();
    await server?.dispose();
  });

  /** Starts a consumer of `durable` with `settings`, and stops it at once: what a replica does at start. */
  const startAndStop = async (durable: string, settings: Partial<ConsumeOptions<typeof configured>> = {}) => {
    const running = await consume({ bus, logger, stream: STREAM, durable, contract: configured, concurrency: 2, handler: async () => undefined, ...settings });
    await running.stop();
  };
  const configOf = async (durable: string) => (await (await bus.jetstreamManager()).consumers.info(STREAM, durable)).config;

  it('takes new settings of a durable that exists (ack wait, deliveries, messages pending) instead of failing the start', async () => {
    await startAndStop('test-changed', { ackWaitMs: 30_000, maxDeliveries: 20, maxAckPending: 16 });
    expect(await configOf('test-changed')).toMatchObject({ ack_wait: nanos(30_000), max_deliver: 25, max_ack_pending: 16 });

    await startAndStop('test-changed', { ackWaitMs: 45_000, maxDeliveries: 100, maxAckPending: 64 });
    expect(await configOf('test-changed')).toMatchObject({ ack_wait: nanos(45_000), max_deliver: 105, max_ack_pending: 64, deliver_policy: 'all', ack_policy: 'explicit' });
  });

  it('lets replicas of two releases start one after the other during a rolling upgrade: the last one started sets the durable', async () => {
    const older = { ackWaitMs: 30_000, maxDeliveries: 20 };
    const newer = { ackWaitMs: 60_000, maxDeliveries: 40 };
    for (const settings of [older, newer, older, newer]) {
      await startAndStop('test-rolling', settings);
      expect(await configOf('test-rolling')).toMatchObject({ ack_wait: nanos(settings.ackWaitMs), max_deliver: settings.maxDeliveries + 5 });
    }
  });

  it('keeps where an existing durable started when asked for another deliver policy (the server cannot change it)', async () => {
    await startAndStop('test-policy', { deliverPolicy: 'all', ackWaitMs: 30_000 });
    await startAndStop('test-policy', { deliverPolicy: 'new', ackWaitMs: 40_000 });
    expect(await configOf('test-policy')).toMatchObject({ deliver_policy: 'all', ack_wait: nanos(40_000) });
  });

  it('updates the durable of a batch consumer too', async () => {
    const batches = async (ackWaitMs: number) => {
      const running = await consumeBatches({ bus, logger, stream: STREAM, durable: 'test-batches', contract: configured, batchSize: 10, concurrency: 1, ackWaitMs, handler: async (items) => items.map(() => ({ ok: true as const })) });
      await running.stop();
    };
    await batches(30_000);
    await batches(50_000);
    expect(await configOf('test-batches')).toMatchObject({ ack_wait: nanos(50_000) });
  });

  it('starts with a retry window of 1.1 hours: 3960.0000000000005 deliveries, rounded up', async () => {
    // WEBHOOK_RETRY_HOURS=1.1, as the webhook router computes its cap; NATS refuses a fraction as invalid JSON.
    await startAndStop('test-retry-hours', { maxDeliveries: 1.1 * 3600 });
    expect(await configOf('test-retry-hours')).toMatchObject({ max_deliver: 3961 + 5 });
  });

  it('sends the other counts and the ack wait as whole numbers too', async () => {
    await startAndStop('test-fractions', { maxAckPending: 10.5, ackWaitMs: 1000.3 });
    const config = await configOf('test-fractions');
    expect(config.max_ack_pending).toBe(11);
    expect(Number.isInteger(config.ack_wait)).toBe(true);
    expect(config.ack_wait).toBeGreaterThanOrEqual(nanos(1000));
  });
});
