import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { eventually, startNatsCluster, type TestNatsCluster } from '@latchkey/testing';
import { createBus, type Bus } from './create-bus.js';
import { createKvLocks, type KvLocks } from './kv-locks.js';
import { openKv } from './kv.js';

// KV locks (the vault's refresh locks, the connection and schedule write keys) on a three-node
// NATS cluster, their bucket in 3 replicas.
let cluster: TestNatsCluster;
const buses: Bus[] = [];

async function replica(index: number): Promise<{ bus: Bus; locks: KvLocks }> {
  const urls = cluster.nodes.map((node) => node.url);
  const servers = [...urls.slice(index), ...urls.slice(0, index)].join(',');
  const bus = await createBus({ servers, service: 'credential-vault', identity: cluster.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 2000, jetstreamReplicas: 3, jetstreamSetupTimeoutMs: 30_000 });
  buses.push(bus);
  return { bus, locks: createKvLocks(await openKv<{ owner: string }>(bus, { name: 'refresh_locks_cluster', ttlMs: 60_000 })) };
}

/** Retries while the bucket elects a new leader (calls throw service_unavailable meanwhile). */
function settled<T>(call: () => Promise<T>, what: string): Promise<T> {
  return eventually(() => call().then((value) => ({ value }), () => undefined), 20_000, what, 200).then(({ value }) => value);
}

beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);

afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.close()));
  await cluster?.dispose();
});

describe('refresh locks on a NATS cluster', () => {
  it('stay held by their one owner when the node leading the lock bucket dies', async () => {
    const [a, b] = await Promise.all([replica(0), replica(1)]);
    // A new bucket on three nodes may answer before its stream has a leader to take writes.
    const held = await settled(() => a.locks.acquire('conn_1'), 'the first acquire');
    expect(held).not.toBeNull();
    const jsm = await a.bus.jetstreamManager();
    const leaderName = await eventually(async () => (await jsm.streams.info('KV_refresh_locks_cluster').catch(() => undefined))?.cluster?.leader, 20_000, 'the bucket leader');
    const dying = cluster.nodes.find((node) => node.name === leaderName);
    if (!dying) throw new Error(`no node named ${leaderName}`);
    await dying.kill();

    // The lock survived the node: nobody else takes it, its owner renews and releases it.
    expect(await settled(() => b.locks.acquire('conn_1'), 'an answer to acquire')).toBeNull();
    expect(await settled(() => b.locks.isHeld('conn_1'), 'an answer to isHeld')).toBe(true);
    expect(await settled(() => a.locks.renew(held!), 'an answer to renew')).toBe(true);
    expect(await settled(() => b.locks.release({ ...held!, revision: held!.revision - 1 }), 'an answer to a stale release')).toBe(false);
    expect(await settled(() => a.locks.release(held!), 'an answer to release')).toBe(true);
    expect(await settled(() => b.locks.acquire('conn_1'), 'an answer to acquire')).not.toBeNull();
    await dying.restart();
  }, 120_000);
});
