import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createBus } from '@latchkey/bus';
import { proxyContracts, STREAMS } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { freePort, logRecords, repoRoot, runToExit, serviceEnvironment, startMongo, startNats, type TestMongo, type TestNats } from '@latchkey/testing';
import { runService } from './index.js';

// A running service in which a callback throws ends as Node would end it (exit 1), but says why
// in one JSON line, as every other line it writes, where Node printed a bare stack trace. The
// service is a process of its own, on the built runtime (`dist/`), against real NATS and FerretDB.

let nats: TestNats;
let mongo: TestMongo;
let dir: string;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  dir = mkdtempSync(join(tmpdir(), 'latchkey-run-main-'));
}, 60_000);

afterAll(async () => {
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('a throw no code caught, once the service runs, is one JSON line and exit 1', async () => {
  const runtime = pathToFileURL(join(repoRoot(), 'libs', 'runtime', 'dist', 'index.js')).href;
  const script = join(dir, 'throws.mjs');
  writeFileSync(
    script,
    `import { runMain } from ${JSON.stringify(runtime)};
const env = process.env;
await runMain({
  service: 'proxy',
  config: { NATS_URL: env.NATS_URL, NATS_PASSWORD: env.NATS_PASSWORD, MONGODB_URI: env.MONGODB_URI, MONGODB_DB: env.MONGODB_DB,
    LOG_LEVEL: 'info', REQUEST_TIMEOUT_MS: 5000, SHUTDOWN_TIMEOUT_MS: 5000 },
  start: async () => { setTimeout(() => { throw new Error('a callback threw'); }, 200); },
});
`,
  );
  const { code, stdout, stderr } = await runToExit(process.execPath, [script], { PATH: process.env['PATH'] ?? '', ...serviceEnvironment('proxy', nats, mongo.uri) }, 30_000);

  expect(stderr).toBe('');
  const records = logRecords<{ level: string; message: string; error?: { message?: string; stack?: string } }>(stdout);
  expect(records.map((record) => record.message)).toEqual(expect.arrayContaining(['ready', 'uncaught exception; exiting']));
  expect(records.at(-1)).toMatchObject({ level: 'error', message: 'uncaught exception; exiting', error: { message: 'a callback threw' } });
  expect(records.at(-1)?.error?.stack).toContain('throws.mjs');
  expect(code).toBe(1);
}, 60_000);

it('a service that declares no database neither connects to one nor waits for one to be ready', async () => {
  // Nothing listens where MONGODB_URI points (a database outage): a service that connected, or
  // whose readiness counted the database, would never be ready here.
  const nowhere = `mongodb://127.0.0.1:${await freePort()}/?directConnection=true`;
  const healthPort = await freePort();
  let given: object | undefined;
  const running = await runService({
    service: 'proxy',
    database: false,
    config: { NATS_URL: nats.url, NATS_PASSWORD: nats.credentials('proxy').password, MONGODB_URI: nowhere, LOG_LEVEL: 'error', REQUEST_TIMEOUT_MS: 5000, SHUTDOWN_TIMEOUT_MS: 5000, HEALTH_PORT: healthPort },
    handleSignals: false,
    start: async (runtime) => {
      given = runtime;
    },
  });
  try {
    expect(given).not.toHaveProperty('mongo');
    expect(running.runtime.isReady()).toBe(true);
    const ready = await fetch(`http://127.0.0.1:${healthPort}/ready`);
    expect(ready.status).toBe(200);
  } finally {
    await running.shutdown();
  }
}, 30_000);

it('answers the requests it took before its shutdown hooks close what their handlers use', async () => {
  // The vault's case: a token request the provider has received, whose HTTP client a shutdown
  // hook closes. Here the hook marks the resource closed; the handler still running reads it.
  let closed = false;
  let taken!: () => void;
  const started = new Promise<void>((resolve) => (taken = resolve));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const running = await runService({
    service: 'proxy',
    database: false,
    config: { NATS_URL: nats.url, NATS_PASSWORD: nats.credentials('proxy').password, MONGODB_URI: mongo.uri, LOG_LEVEL: 'error', REQUEST_TIMEOUT_MS: 5000, SHUTDOWN_TIMEOUT_MS: 5000 },
    handleSignals: false,
    start: async (runtime) => {
      runtime.bus.serve(proxyContracts.verifyCredentials, async () => {
        taken();
        await held;
        return { results: [{ endpoint: '/me', ...(closed ? { error: 'client_closed' } : { status: 200 }) }] };
      });
      runtime.onShutdown(() => {
        closed = true;
      });
    },
  });
  const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 5_000 });
  try {
    const credentials = { id: 'c', provider: 'p', auth_mode: 'API_KEY', expires_at: null, headers: {}, query: {}, decompress: false };
    const answer = vault.request(proxyContracts.verifyCredentials, { credentials, method: 'GET', endpoints: ['/me'], headers: {}, timeout_ms: 1000 });
    await started;
    const stopping = running.shutdown();
    setTimeout(release, 200);
    expect(await answer).toEqual({ results: [{ endpoint: '/me', status: 200 }] });
    await stopping;
    expect(closed).toBe(true);
  } finally {
    await vault.close();
  }
}, 30_000);

it('bounds the JOBS stream by JOBS_STREAM_MAX_BYTES, which the gateway applies to the stream there already', async () => {
  const bound = 128 * 1024 ** 2;
  const config = { NATS_URL: nats.url, NATS_PASSWORD: nats.credentials('gateway').password, MONGODB_URI: mongo.uri, LOG_LEVEL: 'error', REQUEST_TIMEOUT_MS: 5000, SHUTDOWN_TIMEOUT_MS: 5000 };
  const running = await runService({ service: 'gateway', database: false, config: { ...config, JOBS_STREAM_MAX_BYTES: bound }, handleSignals: false, start: async () => undefined });
  const observer = await createBus({ servers: nats.url, service: 'test', identity: nats.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 5_000 });
  try {
    const jsm = await observer.jetstreamManager();
    expect((await jsm.streams.info(STREAMS.jobs.name)).config).toMatchObject({ max_bytes: bound, discard: 'new' });
  } finally {
    await running.shutdown();
    await observer.close();
  }
}, 30_000);
