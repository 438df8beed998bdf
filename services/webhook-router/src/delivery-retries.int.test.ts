import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBus, type Bus } from '@latchkey/bus';
import { webhookContracts, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, startMongo, startNats, type TestMongo, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { deliveryOf, serveEnvironments } from './delivery-fixture.js';
import { startRouter } from './start-router.js';

/**
 * Retries through the router as main.ts wires it, with back-off and circuit breaker shortened
 * by its configuration: a URL's circuit opens at its first failure, for longer than the first
 * retry waits, so deliveries are held between attempts.
 */
const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let mongo: TestMongo;
let router: RunningService<void>;
let gateway: Bus;
let receiver: Server;
/** Answers 503 to a webhook-id's first `failures.get(id)` requests (every request when absent from the map), then 200. */
const failures = new Map<string, number>();
const seen: string[] = [];
/** The environments' primary URL as the gateway has it now (an operator may change it). */
const primaryUrls = new Map<string, string | null>();

const login = (service: ServiceName) => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });
const receiverUrl = (path: string) => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${path}`;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  receiver = createServer((req, res) => {
    const id = String(req.headers['webhook-id']);
    seen.push(`${id} ${req.url}`);
    const left = req.url === '/down' ? 1 : (failures.get(id) ?? 0);
    failures.set(id, left - 1);
    req.resume();
    req.on('end', () => res.writeHead(left > 0 ? 503 : 200).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  gateway = await login('gateway');
  await serveEnvironments(gateway, (id) => primaryUrls.get(id) ?? null);
  const config = configSchema.parse(
    serviceEnvironment('webhook-router', nats, mongo.uri, {
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_RETRY_BASE_MS: '100',
      WEBHOOK_RETRY_CAP_MS: '400',
      WEBHOOK_BREAKER_THRESHOLD: '1',
      WEBHOOK_BREAKER_COOLDOWN_MS: '300',
      WEBHOOK_PARK_AFTER_MS: '150',
    }),
  );
  router = await runService({ service: 'webhook-router', config, start: startRouter, handleSignals: false });
}, 60_000);

afterAll(async () => {
  await router?.runtime.mongo.dropDatabase().catch(() => undefined);
  await router?.shutdown();
  await gateway?.drain();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
  await new Promise((resolve) => receiver?.close(resolve));
});


/** The delivery's attempts, first to last, once one delivered it. */
async function attemptsUntilDelivered(environmentId: string, webhookId: string) {
  return eventually(
    async () => {
      const { data } = await gateway.request(webhookContracts.listAttempts, { environment_id: environmentId, webhook_id: webhookId, limit: 100 });
      return data.some((attempt) => attempt.outcome === 'delivered') ? data.reverse() : undefined;
    },
    20_000,
    `the delivery of ${webhookId}`,
    100,
  );
}

describe('a delivery whose URL fails a few times', () => {
  it('numbers its attempts one by one, the waits of an open circuit not counting as attempts', async () => {
    primaryUrls.set('env_numbered', receiverUrl('/numbered'));
    failures.set('msg_numbered', 4);
    await router.runtime.bus.enqueue(webhookContracts.deliver, deliveryOf('msg_numbered', 'env_numbered', receiverUrl('/numbered')), { msgId: 'msg_numbered:primary' });
    const attempts = await attemptsUntilDelivered('env_numbered', 'msg_numbered');
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status, attempt.outcome])).toEqual([
      [1, 503, 'retrying'],
      [2, 503, 'retrying'],
      [3, 503, 'retrying'],
      [4, 503, 'retrying'],
      [5, 200, 'delivered'],
    ]);
    expect(seen.filter((line) => line.startsWith('msg_numbered '))).toHaveLength(5);
  }, 30_000);
});

describe('a delivery to a URL an operator replaced', () => {
  it('goes to the new URL at its next attempt', async () => {
    primaryUrls.set('env_moved', receiverUrl('/down'));
    await router.runtime.bus.enqueue(webhookContracts.deliver, deliveryOf('msg_moved', 'env_moved', receiverUrl('/down')), { msgId: 'msg_moved:primary' });
    await eventually(() => (seen.includes('msg_moved /down') ? true : undefined), 10_000, 'a first attempt at the failing URL', 50);
    primaryUrls.set('env_moved', receiverUrl('/fallback'));
    const attempts = await attemptsUntilDelivered('env_moved', 'msg_moved');
    expect(attempts.at(-1)).toMatchObject({ url: receiverUrl('/fallback'), status: 200 });
    expect(seen).toContain('msg_moved /fallback');
  }, 30_000);
});
