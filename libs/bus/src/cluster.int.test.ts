import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ping } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { eventually, startNatsCluster, type TestNatsCluster, type TestNatsNode } from '@latchkey/testing';
import { connectionOf } from './bus-connection.js';
import { createBus, type Bus } from './create-bus.js';
import { ensureStreams } from './streams.js';

let cluster: TestNatsCluster;
const logger = createLogger({ service: 'test', silent: true });

beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);

afterAll(async () => {
  await cluster?.dispose();
});

async function connectTo(servers: string): Promise<NatsConnection> {
  const { user, password } = cluster.credentials('observer');
  return connect({ servers: servers.split(','), user, pass: password });
}

describe('startNatsCluster', () => {
  it('starts three routed nodes with a JetStream meta leader, so a 3-replica stream can be created at once', async () => {
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.url.split(',')).toEqual(cluster.nodes.map((node) => node.url));
    expect(Object.keys(cluster.environment).length).toBeGreaterThan(0);
    const nc = await connectTo(cluster.url);
    try {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.add({ name: 'CLUSTER_CHECK', subjects: ['cluster.check'], num_replicas: 3 });
      expect(info.config.num_replicas).toBe(3);
    } finally {
      await nc.close();
    }
  }, 60_000);

  it('kills a node and restarts it on the same port with its store', async () => {
    const node = cluster.nodes[0]!;
    await node.kill();
    await expect(connectTo(node.url)).rejects.toThrow();
    await node.restart();
    await cluster.metaLeader();
    const nc = await connectTo(node.url);
    try {
      const jsm = await jetstreamManager(nc);
      expect((await jsm.streams.info('CLUSTER_CHECK')).config.num_replicas).toBe(3);
    } finally {
      await nc.close();
    }
  }, 60_000);

  it('moves a bus whose node dies to another node: requests work again within 5 s', async () => {
    const buses: Bus[] = [];
    const login = async (service: 'proxy' | 'gateway') => {
      const bus = await createBus({ servers: cluster.url, service, identity: cluster.credentials(service), logger, requestTimeoutMs: 1_000 });
      buses.push(bus);
      return bus;
    };
    try {
      const [proxy, gateway] = await Promise.all([login('proxy'), login('gateway')]);
      proxy.serve(ping.proxy, () => ({ service: 'proxy' as const, instance: 'one', uptime_ms: 0 }));
      await proxy.flush();
      // flush() confirms the proxy's own node has the subscription; the gateway may be on another
      // node, which learns of it over the route a moment later.
      const first = await eventually(() => gateway.request(ping.proxy, {}, { timeoutMs: 500 }).catch(() => undefined), 5_000, 'the subscription to reach every node');
      expect(first).toMatchObject({ instance: 'one' });

      // Kill the node the caller is on (the server may be on it too).
      const address = connectionOf(gateway).nc.getServer();
      const node = cluster.nodes.find((candidate) => candidate.url.endsWith(`:${address.split(':').pop()}`));
      if (!node) throw new Error(`no node at ${address}`);
      await node.kill();
      const killedAt = Date.now();
      let answered: number | undefined;
      while (answered === undefined && Date.now() - killedAt < 10_000) {
        answered = await gateway.request(ping.proxy, {}, { timeoutMs: 500 }).then(
          () => Date.now() - killedAt,
          () => undefined,
        );
      }
      expect(answered).toBeLessThan(5_000);
      expect(connectionOf(gateway).nc.getServer()).not.toBe(address);
      await node.restart();
    } finally {
      await Promise.all(buses.map((bus) => bus.close()));
    }
  }, 60_000);

  it('retries stream setup while JetStream has no quorum, for at most jetstreamSetupTimeoutMs', async () => {
    // Two of three nodes down: the one left answers, but JetStream cannot elect a meta leader.
    const [first, second, third] = cluster.nodes as [TestNatsNode, TestNatsNode, TestNatsNode];
    await Promise.all([second.kill(), third.kill()]);
    const login = (jetstreamSetupTimeoutMs: number) =>
      createBus({ servers: first.url, service: 'observer', identity: cluster.credentials('observer'), logger, requestTimeoutMs: 1_000, jetstreamReplicas: 3, jetstreamSetupTimeoutMs });
    const impatient = await login(2_000);
    const patient = await login(60_000);
    try {
      const startedAt = Date.now();
      await expect(ensureStreams(impatient)).rejects.toThrow();
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_000);

      let done = false;
      const waiting = ensureStreams(patient).then(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(done).toBe(false);
      // The cluster forms again under it (an R3 stream needs all three peers to be placed).
      await Promise.all([second.restart(), third.restart()]);
      await waiting;
      await cluster.metaLeader();
    } finally {
      await Promise.all([impatient.close(), patient.close()]);
    }
  }, 90_000);
});
