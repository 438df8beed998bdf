import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerAvailable } from './docker.js';
import { freePort, untilListening } from './ports.js';

export interface TestNats {
  url: string;
  /** Stops the server (its data stays, so start() brings the same streams back). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  dispose(): Promise<void>;
}

/**
 * A NATS server with JetStream, private to the caller: a container where Docker answers,
 * otherwise the local `nats-server` binary on a free loopback port.
 */
export async function startNats(): Promise<TestNats> {
  if (await dockerAvailable()) return startNatsContainer();
  return startNatsProcess();
}

async function startNatsProcess(): Promise<TestNats> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'latchkey-nats-'));
  const binary = process.env['NATS_SERVER_BIN'] ?? 'nats-server';
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    child = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dataDir], { stdio: 'ignore' });
    await untilListening(child, port, binary);
  }

  async function stop(): Promise<void> {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGKILL');
    });
  }

  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    stop,
    start,
    dispose: async () => {
      await stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function startNatsContainer(): Promise<TestNats> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('nats:2.10')
    .withCommand(['-js'])
    .withExposedPorts(4222)
    .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
    .start();
  return {
    url: `nats://${container.getHost()}:${container.getMappedPort(4222)}`,
    stop: async () => {
      await container.stop({ remove: false });
    },
    start: async () => {
      await container.restart();
    },
    dispose: async () => {
      await container.stop();
    },
  };
}
