import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsIdentityName } from '@latchkey/contracts';
import { eventually } from './eventually.js';
import { testIdentities, type NatsCredentials } from './nats-server.js';
import { freePort, untilListening } from './ports.js';
import { repoRoot } from './repo-root.js';

export interface TestNatsNode {
  /** Its `server_name`, as JetStream reports it (a stream's leader, a peer). */
  name: string;
  /** Its client URL alone. */
  url: string;
  /** Kills it with SIGKILL: no goodbye to clients or peers. Its store stays. */
  kill(): Promise<void>;
  /**
   * Starts it again on the same ports with the same store (killing it first if it runs);
   * resolves when it accepts connections.
   */
  restart(): Promise<void>;
}

export interface TestNatsCluster {
  /** The client URLs of all nodes, comma-separated (what NATS_URL takes). */
  url: string;
  nodes: TestNatsNode[];
  /** The user and password of an identity, as TestNats's. */
  credentials(identity: NatsIdentityName): NatsCredentials;
  /** The NATS_PASSWORD_* variables, for a service process started against this cluster. */
  environment: Record<string, string>;
  /** Resolves with the meta leader's name once the nodes that run agree on one. */
  metaLeader(timeoutMs?: number): Promise<string>;
  /** Kills every node and removes their stores. */
  dispose(): Promise<void>;
}

interface JszReply {
  meta_cluster?: { leader?: string };
}

/**
 * A NATS cluster with clustered JetStream on loopback, private to the caller: `size` (3) native
 * `nats-server` processes on free ports, each with its own store, routed to each other. Clients log
 * in as in `startNats` (the contracts' authorization plus `observer`, fresh passwords). Resolves
 * once JetStream has a meta leader, so streams and KV buckets can be created at once.
 *
 * The binary: `NATS_SERVER_BIN`, else `.data/bin/nats-server` (`make nats-server`), else
 * `nats-server` on PATH.
 */
export async function startNatsCluster(options: { size?: number } = {}): Promise<TestNatsCluster> {
  const size = options.size ?? 3;
  const { environment, credentials, authorization } = testIdentities();
  const binary = natsServerBinary();
  const dataDir = mkdtempSync(join(tmpdir(), 'latchkey-nats-cluster-'));
  const clusterName = `latchkey-test-${randomBytes(3).toString('hex')}`;

  const ports: { client: number; route: number; monitor: number }[] = [];
  for (let index = 0; index < size; index++) ports.push({ client: await freePort(), route: await freePort(), monitor: await freePort() });
  const routes = ports.map((port) => `nats-route://127.0.0.1:${port.route}`);

  const nodes = ports.map((port, index) => {
    const name = `n${index + 1}`;
    const nodeDir = join(dataDir, name);
    mkdirSync(nodeDir);
    const configFile = join(nodeDir, 'nats.conf');
    const config = [
      authorization,
      `server_name: ${JSON.stringify(name)}`,
      `host: "127.0.0.1"`,
      `port: ${port.client}`,
      `http: "127.0.0.1:${port.monitor}"`,
      `jetstream { store_dir: ${JSON.stringify(join(nodeDir, 'js'))} }`,
      `cluster {`,
      `  name: ${JSON.stringify(clusterName)}`,
      `  listen: "127.0.0.1:${port.route}"`,
      `  routes: [${routes.filter((_, other) => other !== index).map((route) => JSON.stringify(route)).join(', ')}]`,
      `}`,
      '',
    ].join('\n');
    writeFileSync(configFile, config, { mode: 0o600 });
    let child: ChildProcess | undefined;

    async function start(): Promise<void> {
      child = spawn(binary, ['-c', configFile], { stdio: 'ignore', env: { ...process.env, ...environment } });
      await untilListening(child, port.client, `${binary} (${name})`);
    }

    async function kill(): Promise<void> {
      const running = child;
      child = undefined;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        running.once('exit', () => resolve());
        running.kill('SIGKILL');
      });
    }

    return { name, url: `nats://127.0.0.1:${port.client}`, monitor: port.monitor, start, kill, running: () => child !== undefined };
  });

  async function metaLeader(timeoutMs = 60_000): Promise<string> {
    let seen = '';
    return eventually(
      async () => {
        const leaders = await Promise.all(
          nodes.filter((node) => node.running()).map(async (node) => {
            try {
              const reply = await fetch(`http://127.0.0.1:${node.monitor}/jsz`, { signal: AbortSignal.timeout(2_000) });
              return ((await reply.json()) as JszReply).meta_cluster?.leader;
            } catch {
              return undefined;
            }
          }),
        );
        seen = leaders.map(String).join(', ');
        const leader = leaders[0];
        return leader && leaders.every((other) => other === leader) ? leader : undefined;
      },
      timeoutMs,
      'an agreed JetStream meta leader',
      200,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message} (the nodes name: ${seen})`);
    });
  }

  async function dispose(): Promise<void> {
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(dataDir, { recursive: true, force: true });
  }

  try {
    await Promise.all(nodes.map((node) => node.start()));
    await metaLeader();
  } catch (error) {
    await dispose();
    throw error;
  }

  return {
    url: nodes.map((node) => node.url).join(','),
    // Restarting a node that still runs kills it first: never two processes for one node.
    nodes: nodes.map((node) => ({
      name: node.name,
      url: node.url,
      kill: node.kill,
      restart: async () => {
        await node.kill();
        await node.start();
      },
    })),
    credentials,
    environment,
    metaLeader,
    dispose,
  };
}

export function natsServerBinary(): string {
  const configured = process.env['NATS_SERVER_BIN'];
  if (configured) return configured;
  const built = join(repoRoot(), '.data', 'bin', 'nats-server');
  return existsSync(built) ? built : 'nats-server';
}
