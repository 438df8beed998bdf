import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { eventually, freePort, natsServerBinary, waitForPort } from '@latchkey/testing';
import { createBus, type Bus } from './index.js';

/**
 * NATS refuses a service's password for a while: rotated on the server before the service's pods
 * were restarted, or a configuration mistake since put right. The service keeps trying, and is
 * back once its password is taken again, rather than closing its connection for good after two
 * refusals and living on, never ready, until someone restarts it.
 */
const logger = createLogger({ service: 'test', silent: true });
const dir = mkdtempSync(join(tmpdir(), 'latchkey-nats-auth-'));
const configFile = join(dir, 'nats.conf');
let port: number;
let server: ChildProcess | undefined;
let bus: Bus | undefined;

async function startServer(password: string): Promise<void> {
  writeFileSync(configFile, `authorization { users = [ { user: "rotated", password: "${password}" } ] }\n`, { mode: 0o600 });
  server = spawn(natsServerBinary(), ['-c', configFile, '-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  await waitForPort(port);
}

async function stopServer(): Promise<void> {
  const running = server;
  server = undefined;
  if (!running || running.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    running.once('exit', () => resolve());
    running.kill('SIGKILL');
  });
}

beforeAll(async () => {
  port = await freePort();
  await startServer('first-password');
}, 30_000);

afterAll(async () => {
  await bus?.close();
  await stopServer();
  rmSync(dir, { recursive: true, force: true });
});

it('fails its start at once when its password is refused, rather than waiting in silence', async () => {
  const started = createBus({ servers: `nats://127.0.0.1:${port}`, service: 'rotated', identity: { user: 'rotated', password: 'wrong-password' }, logger, requestTimeoutMs: 2_000 });
  await expect(started).rejects.toThrow(/Authorization/i);
}, 30_000);

it('keeps reconnecting while its password is refused, and is back once it is taken again', async () => {
  bus = await createBus({ servers: `nats://127.0.0.1:${port}`, service: 'rotated', identity: { user: 'rotated', password: 'first-password' }, logger, requestTimeoutMs: 2_000 });
  expect(bus.isConnected()).toBe(true);

  await stopServer();
  await startServer('second-password');
  // Refused again and again (a reconnect every 250 ms or so): far more than the two refusals
  // after which the client gave up by default.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  expect(bus.isConnected()).toBe(false);

  await stopServer();
  await startServer('first-password');
  await eventually(() => (bus!.isConnected() ? true : undefined), 15_000, 'the bus to reconnect', 100);
  await bus.flush();
}, 60_000);
