import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createBus, openKv, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, freePort, startMongo, startNatsCluster, type TestMongo, type TestNatsCluster, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { createLease, type Lease } from './scheduling/lease.js';
import { startScheduler } from './start-scheduler.js';

// The scheduler on a three-node NATS cluster, with every stream and bucket in 3 replicas.
const logger = createLogger({ service: 'test', silent: true });
let cluster: TestNatsCluster;
let mongo: TestMongo;
let scheduler: RunningService<void> | undefined;
const buses: Bus[] = [];

beforeAll(async () => {
  [cluster, mongo] = await Promise.all([startNatsCluster(), startMongo()]);
}, 60_000);

afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.close().catch(() => undefined)));
  await scheduler?.runtime.mongo.dropDatabase().catch(() => undefined);
  await scheduler?.shutdown();
  await Promise.all([cluster?.dispose(), mongo?.dispose()]);
});

async function readyStatus(port: number): Promise<number | undefined> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/ready`)).status;
  } catch {
    return undefined;
  }
}

describe('sync-scheduler on a NATS cluster', () => {
  it('starts while the cluster is still coming up: not ready while JetStream elects its leader, then ready', async () => {
    // Every node down: the service starts first, then the cluster forms under it.
    for (const node of cluster.nodes) await node.kill();
    const healthPort = await freePort();
    const config = configSchema.parse(
      serviceEnvironment('sync-scheduler', cluster, mongo.uri, {
        HEALTH_PORT: String(healthPort),
        JETSTREAM_REPLICAS: '3',
        JETSTREAM_SETUP_TIMEOUT_MS: '120000',
      }),
    );
    const starting = runService({ service: 'sync-scheduler', config, start: startScheduler, handleSignals: false });
    let failed: unknown;
    starting.catch((error: unknown) => (failed = error));
    expect(await eventually(() => readyStatus(healthPort), 10_000, 'the probe server')).toBe(503);

    for (const node of cluster.nodes) await node.restart();
    // Right after the nodes listen, JetStream has no meta leader: the service waits it out.
    scheduler = await starting;
    expect(failed).toBeUndefined();
    await eventually(async () => ((await readyStatus(healthPort)) === 200 ? true : undefined), 30_000, '/ready to answer 200');

    const observer = await createBus({ servers: cluster.url, service: 'observer', identity: cluster.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    buses.push(observer);
    const jsm = await observer.jetstreamManager();
    expect((await jsm.streams.info('KV_sync_scheduler_lease')).config.num_replicas).toBe(3);
    expect((await jsm.streams.info('EVENTS')).config.num_replicas).toBe(3);
  }, 180_000);

  it('keeps one lease holder at a time when the node leading the lease bucket dies', async () => {
    const contenders: Array<{ lease: Lease; bus: Bus }> = [];
    for (const [index, node] of cluster.nodes.slice(0, 2).entries()) {
      // Each contender starts on a different node, and may fail over to any.
      const servers = [node.url, ...cluster.nodes.filter((other) => other !== node).map((other) => other.url)].join(',');
      const bus = await createBus({ servers, service: 'observer', identity: cluster.credentials('observer'), logger, requestTimeoutMs: 2_000, jetstreamReplicas: 3, jetstreamSetupTimeoutMs: 30_000 });
      buses.push(bus);
      const kv = await openKv<{ owner: string }>(bus, { name: 'sync_scheduler_lease', ttlMs: 6_000 });
      contenders.push({ bus, lease: createLease(kv, 'cluster-test', `contender-${index}`) });
    }
    let both = 0;
    let running = true;
    const loop = (async () => {
      while (running) {
        await Promise.all(contenders.map(({ lease }) => lease.tick().catch(() => false)));
        if (contenders.every(({ lease }) => lease.holding())) both++;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    try {
      await eventually(() => (contenders.some(({ lease }) => lease.holding()) ? true : undefined), 20_000, 'a first holder');
      const jsm = await contenders[0]!.bus.jetstreamManager();
      const leaderName = await eventually(async () => (await jsm.streams.info('KV_sync_scheduler_lease').catch(() => undefined))?.cluster?.leader, 20_000, 'the bucket leader');
      const leader = cluster.nodes.find((node) => node.name === leaderName);
      expect(leader).toBeDefined();
      await leader!.kill();
      // A holder again on the two nodes left: the same one renewing, or, if its renewal failed
      // during the election (it stops leading at once), another after the entry's TTL.
      await eventually(() => (contenders.some(({ lease }) => lease.holding()) ? true : undefined), 20_000, 'a holder after the node died');
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      await eventually(() => (contenders.some(({ lease }) => lease.holding()) ? true : undefined), 20_000, 'a holder still');
      // Never two at once, through it all.
      expect(both).toBe(0);
      await leader!.restart();
    } finally {
      running = false;
      await loop;
    }
  }, 120_000);
});
