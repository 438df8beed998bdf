import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBus, type Bus } from '@latchkey/bus';
import { STREAMS, webhookContracts, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { scrape } from '@latchkey/metrics';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, startMongo, startNats, type TestMongo, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { deliveryOf, serveEnvironments } from './delivery-fixture.js';
import { startRouter } from './start-router.js';

/**
 * One environment's URL that keeps failing must not hold up the other environments' webhooks:
 * its deliveries wait out their back-off outside the deliveries consumer's pending set, which
 * this router keeps small (`WEBHOOK_MAX_ACK_PENDING`) and its back-off long, so that a delivery
 * held there would wait minutes.
 */
const logger = createLogger({ service: 'test', silent: true });
const MAX_ACK_PENDING = 16;
let nats: TestNats;
let mongo: TestMongo;
let router: RunningService<void>;
let gateway: Bus;
let observer: Bus;
let dead: Server;
let live: Server;
const deadSeen: string[] = [];
const liveSeen: string[] = [];

const login = (service: ServiceName | 'observer') => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

/** A receiver on loopback that answers every webhook with `status`, noting its webhook-id. */
async function receiver(status: number, seen: string[]): Promise<Server> {
  const server = createServer((req, res) => {
    seen.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => res.writeHead(status).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  [dead, live] = await Promise.all([receiver(503, deadSeen), receiver(200, liveSeen)]);
  // The gateway knows two environments: `env_dead`, whose URL answers 503, and `env_live`.
  gateway = await login('gateway');
  await serveEnvironments(gateway, (id) => urlOf(id === 'env_dead' ? dead : live));
  observer = await login('observer');

  const config = configSchema.parse(
    serviceEnvironment('webhook-router', nats, mongo.uri, {
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_MAX_ACK_PENDING: String(MAX_ACK_PENDING),
      // A failed delivery comes back in five to ten minutes; the circuit never opens here.
      WEBHOOK_RETRY_BASE_MS: '600000',
      WEBHOOK_BREAKER_THRESHOLD: '1000',
    }),
  );
  router = await runService({ service: 'webhook-router', config, start: startRouter, handleSignals: false });
}, 60_000);

afterAll(async () => {
  await observer?.drain();
  await router?.runtime.mongo.dropDatabase().catch(() => undefined);
  await router?.shutdown();
  await gateway?.drain();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
  await Promise.all([dead, live].map((server) => new Promise((resolve) => server?.close(resolve))));
});

describe("one environment's failing URL", () => {
  it("does not hold up another environment's deliveries while its own wait out their back-off, nor keeps them pending in JetStream", async () => {
    // More failing deliveries than JetStream lets the consumer hold.
    const backlog = Array.from({ length: MAX_ACK_PENDING + 8 }, (_, i) => `msg_backlog_${i}`);
    for (const id of backlog) await router.runtime.bus.enqueue(webhookContracts.deliver, deliveryOf(id, 'env_dead', urlOf(dead)), { msgId: `${id}:primary` });
    // Every one the consumer could take has had its first attempt (and waits for its next).
    await eventually(() => (new Set(deadSeen).size >= MAX_ACK_PENDING ? true : undefined), 20_000, 'the first attempts at the failing URL', 50);

    await router.runtime.bus.enqueue(webhookContracts.deliver, deliveryOf('msg_fresh', 'env_live', urlOf(live)), { msgId: 'msg_fresh:primary' });
    await eventually(() => (liveSeen.includes('msg_fresh') ? true : undefined), 15_000, 'the other environment’s delivery', 50);

    // The failing URL's deliveries all had their attempt, and wait for the next one outside
    // JetStream: nothing of theirs is left pending there.
    await eventually(() => (new Set(deadSeen).size === backlog.length ? true : undefined), 15_000, 'every first attempt', 50);
    const jsm = await observer.jetstreamManager();
    const pending = await eventually(
      async () => {
        const info = await jsm.consumers.info(STREAMS.jobs.name, 'webhook-router-deliveries');
        return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
      },
      15_000,
      'no delivery left pending in JetStream',
      100,
    );
    expect(pending.num_ack_pending).toBe(0);
    const attempts = await gateway.request(webhookContracts.listAttempts, { environment_id: 'env_dead', limit: 1000 });
    expect(attempts.data).toHaveLength(backlog.length);
    for (const attempt of attempts.data) {
      expect(attempt).toMatchObject({ attempt: 1, status: 503, outcome: 'retrying' });
      expect(new Date(attempt.next_attempt_at!).getTime()).toBeGreaterThan(Date.now() + 60_000);
    }
    // The metrics say where they wait: in the database, not in JetStream.
    const metrics = await scrape();
    expect(metrics).toMatch(new RegExp(`^latchkey_webhook_parked ${backlog.length}$`, 'm'));
    expect(metrics).toMatch(/^latchkey_webhook_backlog\{queue="webhook-router-deliveries"\} 0$/m);
  }, 60_000);
});
