import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerAvailable } from './docker.js';
import { freePort, untilListening } from './ports.js';
import { repoRoot } from './repo-root.js';

export interface TestMongo {
  /** A MongoDB-wire URI; give each test its own database name. */
  uri: string;
  /**
   * Our FerretDB only: stops the server (SIGKILL), keeps it away for `downMs`, and starts it
   * again on the same port with the same data; resolves when it accepts connections.
   */
  restart?(downMs?: number): Promise<void>;
  dispose(): Promise<void>;
}

/** A database name no other test uses. */
export function uniqueDbName(prefix = 'test'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/**
 * A MongoDB-wire server: the one `MONGODB_URI` names when set (CI starts one FerretDB for the
 * run), else MongoDB 7 in a container where Docker answers, else our FerretDB build
 * (`make ferretdb`) on a free loopback port: SQLite backend, or PostgreSQL when
 * `FERRETDB_POSTGRES_URL` names a database.
 */
export async function startMongo(): Promise<TestMongo> {
  const given = process.env['MONGODB_URI'];
  if (given) return { uri: given, dispose: async () => undefined };
  if (await dockerAvailable()) return startMongoContainer();
  return startFerretDb();
}

/**
 * Our own FerretDB build on a free loopback port, whatever `MONGODB_URI` says: for a test that
 * takes the database away (`restart`), which a shared server must not be.
 */
export async function startFerretDb(): Promise<TestMongo & { restart(downMs?: number): Promise<void> }> {
  const binary = process.env['FERRETDB_BIN'] ?? join(repoRoot(), '.data', 'bin', 'ferretdb');
  if (!existsSync(binary)) throw new Error(`no FerretDB binary at ${binary}: run \`make ferretdb\` first`);
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'latchkey-ferretdb-'));
  // FERRETDB_POSTGRES_URL selects the PostgreSQL backend (each MongoDB database is a schema there).
  const postgres = process.env['FERRETDB_POSTGRES_URL'];
  const backend = postgres ? ['-handler', 'postgresql', '-postgres', postgres] : ['-sqlite', dataDir];
  const launch = async () => {
    const started: ChildProcess = spawn(binary, ['-listen', `127.0.0.1:${port}`, ...backend], { stdio: 'ignore' });
    await untilListening(started, port, binary);
    return started;
  };
  let child = await launch();
  return {
    uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
    restart: async (downMs = 0) => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGKILL');
        await exited;
      }
      await new Promise((resolve) => setTimeout(resolve, downMs));
      child = await launch();
    },
    dispose: async () => {
      if (child.exitCode === null) {
        await new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        });
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function startMongoContainer(): Promise<TestMongo> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('mongo:7')
    .withExposedPorts(27017)
    .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
    .start();
  return {
    uri: `mongodb://${container.getHost()}:${container.getMappedPort(27017)}/?directConnection=true`,
    dispose: async () => {
      await container.stop();
    },
  };
}
