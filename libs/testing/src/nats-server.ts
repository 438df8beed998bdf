import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { natsPasswordVariable, renderNatsAuthorization, SERVICE_NAMES, TEST_IDENTITIES, type NatsIdentityName } from '@latchkey/contracts';
import { dockerAvailable } from './docker.js';
import { freePort, untilListening } from './ports.js';

export interface NatsCredentials {
  user: string;
  password: string;
}

export interface TestNats {
  url: string;
  /**
   * The user and password of an identity of this server: a service's own (allowed only its
   * contracts' subjects, as in production), or `observer`, which may publish and subscribe to
   * everything and exists only in test servers (to watch every message, or to play a client).
   */
  credentials(identity: NatsIdentityName): NatsCredentials;
  /** Stops the server (its data stays, so start() brings the same streams back). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  dispose(): Promise<void>;
  /**
   * Puts another `authorization` block in force as an operator does: the config is rewritten and
   * the server reloads it, clients staying connected. Resolves once the server has been told;
   * it applies the block moments later.
   */
  reload(authorization: string): Promise<void>;
}

/**
 * A NATS server with JetStream, private to the caller: a container where Docker answers,
 * otherwise the local `nats-server` binary on a free loopback port. It runs the authorization
 * deployments run (generated from the contracts), with fresh passwords, plus the test-only
 * `observer`: every client must log in as some identity.
 */
/**
 * A fresh password for every service and test identity, as the server's environment
 * (`NATS_PASSWORD_*`), the authorization block that reads them, and a lookup by identity.
 */
export function testIdentities() {
  const identities = [...SERVICE_NAMES, ...TEST_IDENTITIES];
  // A letter first: the server reads each from its environment as a config value, and one that
  // starts with a digit or `-` would be taken for a number (and fail the server now and then).
  const passwords = new Map<string, string>(identities.map((identity) => [identity, `p${randomBytes(24).toString('hex')}`]));
  const environment: Record<string, string> = Object.fromEntries(identities.map((identity) => [natsPasswordVariable(identity), passwords.get(identity)!]));
  const credentials = (identity: NatsIdentityName): NatsCredentials => {
    const password = passwords.get(identity);
    if (password === undefined) throw new Error(`no NATS identity ${identity}`);
    return { user: identity, password };
  };
  return { environment, credentials, authorization: renderNatsAuthorization({ testIdentities: true }) };
}

/**
 * `authorization` replaces the contracts' block (a test of what a service does while NATS
 * refuses it something); it reads the same passwords, `$LATCHKEY_NATS_PASSWORD_<IDENTITY>`.
 */
export async function startNats(options: { authorization?: string } = {}): Promise<TestNats> {
  const { environment, credentials, authorization: standard } = testIdentities();
  const authorization = options.authorization ?? standard;
  if (await dockerAvailable()) return { ...(await startNatsContainer(authorization, environment)), credentials };
  return { ...(await startNatsProcess(authorization, environment)), credentials };
}

async function startNatsProcess(authorization: string, environment: Record<string, string>): Promise<Omit<TestNats, 'credentials'>> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'latchkey-nats-'));
  const configFile = join(dataDir, 'nats.conf');
  const writeConfig = (block: string) => writeFileSync(configFile, `${block}\njetstream { store_dir: ${JSON.stringify(join(dataDir, 'js'))} }\n`, { mode: 0o600 });
  writeConfig(authorization);
  const binary = process.env['NATS_SERVER_BIN'] ?? 'nats-server';
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    child = spawn(binary, ['-c', configFile, '-a', '127.0.0.1', '-p', String(port), '-js'], { stdio: 'ignore', env: { ...process.env, ...environment } });
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
    reload: async (block) => {
      writeConfig(block);
      if (child?.exitCode === null) child.kill('SIGHUP');
    },
  };
}

async function startNatsContainer(authorization: string, environment: Record<string, string>): Promise<Omit<TestNats, 'credentials'>> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('nats:2.10')
    .withCopyContentToContainer([{ content: `${authorization}\njetstream { store_dir: "/data" }\n`, target: '/etc/nats/test.conf' }])
    .withEnvironment(environment)
    .withCommand(['-c', '/etc/nats/test.conf', '-js'])
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
    reload: async (block) => {
      await container.copyContentToContainer([{ content: `${block}\njetstream { store_dir: "/data" }\n`, target: '/etc/nats/test.conf' }]);
      // The server is the container's first process; the image holds no shell or kill.
      await container.exec(['nats-server', '--signal', 'reload=1']);
    },
  };
}
