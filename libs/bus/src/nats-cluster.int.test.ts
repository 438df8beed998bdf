import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { startNatsCluster, type TestNatsCluster } from '@latchkey/testing';

let cluster: TestNatsCluster;

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
});
