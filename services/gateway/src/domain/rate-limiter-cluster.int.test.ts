import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createBus, openKv, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { eventually, startNatsCluster, type TestNatsCluster } from '@latchkey/testing';
import { createRateLimiter, type RateLimiter } from './rate-limiter.js';

// The shared window on a three-node NATS cluster, its bucket in 3 replicas.
let cluster: TestNatsCluster;
const WINDOW_START = Math.floor(Date.now() / 60_000) * 60_000;
const buses: Bus[] = [];

async function replica(index: number, limit: number, bucket: string): Promise<{ bus: Bus; limiter: RateLimiter }> {
  // Each replica starts on a different node and may fail over to any.
  const urls = cluster.nodes.map((node) => node.url);
  const servers = [...urls.slice(index % urls.length), ...urls.slice(0, index % urls.length)].join(',');
  const bus = await createBus({ servers, service: 'gateway', identity: cluster.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 2000, jetstreamReplicas: 3, jetstreamSetupTimeoutMs: 30_000 });
  buses.push(bus);
  const store = await openKv<{ reserved: number }>(bus, { name: bucket, ttlMs: 300_000 });
  // One window throughout, whatever the wall clock: the budget must not renew mid-test.
  return { bus, limiter: createRateLimiter({ store, now: () => WINDOW_START + 1_000 }, { limit, windowMs: 60_000 }) };
}

beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);

afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.close()));
  await cluster?.dispose();
});

describe('rate limiter on a NATS cluster', () => {
  it('never admits more than the limit across replicas when the node leading the window bucket dies', async () => {
    const limit = 200;
    const replicas = await Promise.all([0, 1, 2].map((index) => replica(index, limit, 'rl_cluster')));
    let allowed = 0;
    let refused = 0;
    let unavailable = 0;
    const take = async (count: number) => {
      for (let i = 0; i < count; i++) {
        try {
          if ((await replicas[i % 3]!.limiter.take('acc_1')).allowed) allowed++;
          else refused++;
        } catch {
          // service_unavailable while the bucket elects a new leader (the gateway answers 503).
          unavailable++;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };
    await take(60);
    expect(allowed).toBe(60);
    const jsm = await replicas[0]!.bus.jetstreamManager();
    const leaderName = await eventually(async () => (await jsm.streams.info('KV_rl_cluster').catch(() => undefined))?.cluster?.leader, 20_000, 'the bucket leader');
    const dying = cluster.nodes.find((node) => node.name === leaderName);
    if (!dying) throw new Error(`no node named ${leaderName}`);
    await dying.kill();
    const killedAt = Date.now();
    // Admitting again within seconds on the two nodes left, then refusing once the budget is spent.
    while (allowed === 60 && Date.now() - killedAt < 20_000) await take(3);
    expect(allowed).toBeGreaterThan(60);
    while (refused < 30 && Date.now() - killedAt < 60_000) await take(3);
    expect(refused).toBeGreaterThanOrEqual(30);
    expect(allowed).toBeLessThanOrEqual(limit);
    // A slice reserved in a write whose answer was lost stays unspent: never more than a few.
    expect(allowed).toBeGreaterThanOrEqual(limit - 3 * 20);
    await dying.restart();
  }, 120_000);
});
