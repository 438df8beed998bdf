import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBus } from '@latchkey/bus';
import { gatewayContracts, recordsContracts, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { freePort, repoRoot, startMongo, startNats, uniqueDbName } from '@latchkey/testing';
import { benchApiKeys, benchConnections } from './scale-lookups.js';
import { benchScheduler, benchWebhooks } from './scale-queues.js';

/**
 * `make bench-scale`: how the cost of each hot operation grows with the data beside it. For each
 * backend (FerretDB on SQLite, the embedded default, and FerretDB on PostgreSQL), the services
 * run from their built `dist/main.js`; one connection's scope of one model is grown through the
 * real write path (`records.write`, as a sync's `batchSave` calls it, in batches of 5,000, as
 * large as one NATS message takes) to each size in turn, and at each size the bench times:
 * - saving 1,000 new records, and re-saving 1,000 unchanged ones (the lookup a re-sync makes);
 * - `GET /records`: the first page, a page deep in the cursor, `modified_after`, `filter=updated`
 *   (pages of 1,000);
 * - `PATCH /records/prune` of 1,000 records.
 * It prints each operation's milliseconds at each size and the ratio largest ÷ smallest: flat is
 * near 1, a scan grows with the size. Sizes come from `BENCH_SCALE_SIZES` (default
 * 10000,100000,1000000), backends from `BENCH_SCALE_BACKENDS` (default sqlite,postgresql; the
 * PostgreSQL one needs a server at `BENCH_SCALE_POSTGRES`, default 127.0.0.1:5432 as postgres).
 * `BENCH_SCALE_PARTS` (default records,connections,api-keys) picks the parts; connections are
 * measured at `BENCH_SCALE_CONNECTIONS` (default 1000,10000,100000) connections in the
 * environment, API-key authentication at `BENCH_SCALE_KEYS` (default 100,10000) keys (see
 * scale-lookups.ts). The webhooks part drains backlogs of `BENCH_SCALE_WEBHOOKS` (default
 * 1000,10000,100000) provider webhooks and customer deliveries, the scheduler part ticks with
 * `BENCH_SCALE_SCHEDULES` (default 100,1000,10000) schedules due (see scale-queues.ts); neither
 * is in the default parts.
 */
const SIZES = (process.env['BENCH_SCALE_SIZES'] ?? '10000,100000,1000000').split(',').map(Number);
const BACKENDS = (process.env['BENCH_SCALE_BACKENDS'] ?? 'sqlite,postgresql').split(',');
const POSTGRES = process.env['BENCH_SCALE_POSTGRES'] ?? 'postgres://postgres@127.0.0.1:5432';
const PARTS = (process.env['BENCH_SCALE_PARTS'] ?? 'records,connections,api-keys').split(',');
const CONNECTION_SIZES = (process.env['BENCH_SCALE_CONNECTIONS'] ?? '1000,10000,100000').split(',').map(Number);
const KEY_SIZES = (process.env['BENCH_SCALE_KEYS'] ?? '100,10000').split(',').map(Number);
const WEBHOOK_SIZES = (process.env['BENCH_SCALE_WEBHOOKS'] ?? '1000,10000,100000').split(',').map(Number);
const SCHEDULE_SIZES = (process.env['BENCH_SCALE_SCHEDULES'] ?? '100,1000,10000').split(',').map(Number);
/** Records per load batch: as many as fit one NATS message (1 MB) at this record size. */
const LOAD_BATCH = 5000;
const PROBE = 1000;
const MODEL = 'Contact';
const CONNECTION = { connection_id: 'scale', provider_config_key: 'scale-upstream' };

/** Each service's output, for a failed run: .data/bench-scale/<backend>-<service>.log. */
const logDir = join(repoRoot(), '.data', 'bench-scale');
mkdirSync(logDir, { recursive: true });
const entry = (service: ServiceName) => join(repoRoot(), 'services', service, 'dist', 'main.js');
// The NATS line deployed (2.10 and later; `make nats-server` builds 2.12), not Debian's 2.9, which
// the tests' single server falls back to: on 2.9 the server itself spent most of a core finding each
// pull's next message in a deep JOBS backlog, and the webhook drains measured it, not Latchkey.
const builtNats = join(repoRoot(), '.data', 'bin', 'nats-server');
if (!process.env['NATS_SERVER_BIN'] && existsSync(builtNats)) process.env['NATS_SERVER_BIN'] = builtNats;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const elapsedMs = (startedAt: bigint) => Number(process.hrtime.bigint() - startedAt) / 1e6;

function contact(id: string) {
  return { id, name: `Person ${id}`, email: `${id}@example.com`, plan: 'pro', tags: ['crm', 'scale'], address: { city: 'Lyon', zip: '69001' } };
}

/** Per operation, its milliseconds at each size measured. */
type Timings = Map<string, Array<[size: number, ms: number]>>;

async function benchBackend(backend: string): Promise<Timings> {
  // The backends measured are FerretDB's: no MongoDB container, even where Docker answers.
  process.env['LATCHKEY_TEST_DOCKER'] = '0';
  let postgresDb: string | undefined;
  if (backend === 'postgresql') {
    postgresDb = uniqueDbName('bench_scale');
    execFileSync('psql', [POSTGRES, '-qc', `create database ${postgresDb}`], { stdio: 'ignore' });
    process.env['FERRETDB_POSTGRES_URL'] = `${POSTGRES}/${postgresDb}`;
  } else {
    delete process.env['FERRETDB_POSTGRES_URL'];
  }
  const [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  const children: ChildProcess[] = [];
  const databases = new Map<ServiceName, string>();
  const opened = new Set<ServiceName>();
  const start = (service: ServiceName, env: Record<string, string>) => {
    const flags = service === 'sync-scheduler' ? ['--no-node-snapshot'] : [];
    if (!databases.has(service)) databases.set(service, uniqueDbName(`scale_${service.replace('-', '_')}`));
    // A restarted service's output follows its earlier run's.
    const log = openSync(join(logDir, `${backend}-${service}.log`), opened.has(service) ? 'a' : 'w');
    opened.add(service);
    const child = spawn(process.execPath, [...flags, entry(service)], {
      env: {
        ...process.env,
        NATS_URL: nats.url,
        NATS_PASSWORD: nats.credentials(service).password,
        MONGODB_URI: mongo.uri,
        MONGODB_DB: databases.get(service)!,
        HEALTH_PORT: '0',
        LOG_LEVEL: 'error',
        // A scan of a large scope takes longer than the default deadline; the bench wants its time, not a 503.
        REQUEST_TIMEOUT_MS: '600000',
        ...env,
      },
      stdio: ['ignore', log, 'inherit'],
    });
    children.push(child);
    return child;
  };
  const stop = async (child: ChildProcess) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  const providersFile = join(mkdtempSync(join(tmpdir(), 'latchkey-bench-scale-')), 'providers.yaml');
  writeFileSync(
    providersFile,
    'scale-upstream:\n  display_name: Scale upstream\n  categories: [test]\n  auth_mode: API_KEY\n  proxy:\n    base_url: http://127.0.0.1:9\n    headers:\n      X-Api-Key: ${apiKey}\n' +
      'scale-hooks:\n  display_name: Scale hooks\n  categories: [test]\n  auth_mode: API_KEY\n  webhook:\n    signature_header: X-Scale-Signature\n    algorithm: sha256\n    encoding: hex\n    prefix: sha256=\n',
  );
  start('credential-vault', { ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`, PROVIDERS_FILE: providersFile });
  const scheduler = { child: start('sync-scheduler', {}) };
  const port = await freePort();
  const adminToken = randomBytes(24).toString('base64url');
  const apiKey = `lk_sk_${randomBytes(32).toString('base64url')}`;
  start('gateway', {
    PORT: String(port),
    METRICS_PORT: '0',
    ADMIN_TOKEN: adminToken,
    API_KEY_DIGEST_SECRET: randomBytes(24).toString('base64url'),
    SETTINGS_ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
    BOOTSTRAP_SECRET_KEY: apiKey,
    RATE_LIMIT_PER_MINUTE: '1000000000',
    WEBHOOK_INGEST_BYTES_PER_MINUTE: '1000000000000',
  });
  const base = `http://127.0.0.1:${port}`;
  const logger = createLogger({ service: 'bench', silent: true });
  const bus = await createBus({ servers: nats.url, service: 'bench-scale', identity: nats.credentials('action-runner'), logger, requestTimeoutMs: 600_000 });
  const routerBus = await createBus({ servers: nats.url, service: 'bench-scale', identity: nats.credentials('webhook-router'), logger, requestTimeoutMs: 600_000 });
  const schedulerBus = await createBus({ servers: nats.url, service: 'bench-scale', identity: nats.credentials('sync-scheduler'), logger, requestTimeoutMs: 600_000 });

  /** A call through the gateway, retried while a service is still starting. */
  async function api(method: string, path: string, body?: unknown, secret = apiKey): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${secret}`,
          'connection-id': CONNECTION.connection_id,
          'provider-config-key': CONNECTION.provider_config_key,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).catch(() => undefined);
      if (response && response.status !== 503) {
        if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
        return response.json();
      }
      if (attempt > 600) throw new Error(`${method} ${path}: the stack did not start`);
      await sleep(100);
    }
  }

  async function admin(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  const timings: Timings = new Map();
  const record = (name: string, size: number, ms: number) => {
    timings.set(name, [...(timings.get(name) ?? []), [size, ms]]);
    process.stderr.write(`[${backend}]   ${name} at ${size}: ${ms.toFixed(0)}${/, (ms|MiB)/.test(name) ? '' : ' ms'}\n`);
  };
  try {
    await api('POST', '/integrations', { provider: 'scale-upstream', unique_key: 'scale-upstream' });
    await api('POST', '/connections', { ...CONNECTION, credentials: { type: 'API_KEY', apiKey: 'scale-key' } });
    const environments = (await (await fetch(`${base}/admin/environments`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as {
      data: Array<{ name: string; public_id: string }>;
    };
    const publicId = environments.data.find((environment) => environment.name === 'dev')!.public_id;
    const environmentId = (await bus.request(gatewayContracts.getEnvironment, { public_id: publicId })).id;
    const write = (ids: string[]) =>
      bus.request(recordsContracts.write, { environment_id: environmentId, ...CONNECTION, model: MODEL, variant: 'base', mode: 'save', records: ids.map(contact) });
    const ids = (from: number, count: number, prefix = 'c') => Array.from({ length: count }, (_, i) => `${prefix}${from + i}`);
    const page = (query: Record<string, string>) => api('GET', `/records?${new URLSearchParams({ model: MODEL, limit: String(PROBE), ...query })}`) as Promise<{
      records: Array<{ _metadata: { cursor: string } }>;
      next_cursor: string | null;
    }>;
    let size = 0;
    const timed = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      const startedAt = process.hrtime.bigint();
      const result = await work();
      record(name, size, elapsedMs(startedAt));
      return result;
    };
    const lookups = {
      mongoUri: mongo.uri,
      vaultDb: databases.get('credential-vault')!,
      gatewayDb: databases.get('gateway')!,
      environmentId,
      api,
      admin,
      record,
      note: (text: string) => process.stderr.write(`[${backend}] ${text}\n`),
    };

    // The sync-scheduler may still be subscribing: an empty save answers once it is.
    for (let attempt = 0; ; attempt++) {
      const ready = await write([]).then(
        () => true,
        (error: unknown) => {
          if (attempt > 600) throw error;
          return false;
        },
      );
      if (ready) break;
      await sleep(100);
    }
    let loaded = 0;
    for (size of PARTS.includes('records') ? SIZES : []) {
      const loadStarted = process.hrtime.bigint();
      while (loaded < size) {
        const count = Math.min(LOAD_BATCH, size - loaded);
        const result = await write(ids(loaded, count));
        if (result.added !== count) throw new Error(`loading: records.write added ${result.added} of ${count}`);
        loaded += count;
      }
      process.stderr.write(`[${backend}] ${size} records loaded (${(elapsedMs(loadStarted) / 1000).toFixed(1)} s)\n`);
      const before = new Date(Date.now() - 1).toISOString();
      const added = await timed('records: save 1,000 new', () => write(ids(0, PROBE, `n${size}-`)));
      if (added.added !== PROBE) throw new Error(`records.write added ${added.added}`);
      const unchanged = await timed('records: re-save 1,000 unchanged', () => write(ids(size - 2 * PROBE, PROBE)));
      if (unchanged.unchanged !== PROBE) throw new Error(`records.write left ${unchanged.unchanged} unchanged`);
      await timed('GET /records, first page', () => page({}));
      const deep = await page({ ids: `c${size - 2 * PROBE}` });
      const cursor = deep.records[0]!._metadata.cursor;
      const deeper = await timed('GET /records, page deep in the cursor', () => page({ cursor }));
      const recent = await timed('GET /records?modified_after', () => page({ modified_after: before }));
      if (recent.records.length !== PROBE) throw new Error(`modified_after returned ${recent.records.length}`);
      await timed('GET /records?filter=updated', () => page({ filter: 'updated' }));
      // Up to the deep page's last record: at least 1,000 records left to prune at every size.
      const pruneUntil = deeper.records.at(-1)!._metadata.cursor;
      await timed('PATCH /records/prune (1,000)', () => api('PATCH', '/records/prune', { model: MODEL, until_cursor: pruneUntil, limit: PROBE }));
    }
    if (PARTS.includes('connections')) await benchConnections(lookups, CONNECTION_SIZES);
    if (PARTS.includes('api-keys')) await benchApiKeys(lookups, KEY_SIZES);
    const queues = {
      mongoUri: mongo.uri,
      schedulerDb: databases.get('sync-scheduler')!,
      environmentId,
      routerBus,
      schedulerBus,
      gatewayUrl: base,
      api: (method: string, path: string, body?: unknown) => api(method, path, body),
      admin,
      startService: (service: 'webhook-router' | 'sync-scheduler') => start(service, service === 'webhook-router' ? { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' } : {}),
      stopService: stop,
      record,
      note: lookups.note,
    };
    if (PARTS.includes('webhooks')) await benchWebhooks(queues, WEBHOOK_SIZES);
    if (PARTS.includes('scheduler')) await benchScheduler(queues, SCHEDULE_SIZES, scheduler);
    return timings;
  } finally {
    await bus.drain().catch(() => undefined);
    await routerBus.drain().catch(() => undefined);
    await schedulerBus.drain().catch(() => undefined);
    for (const child of children) child.kill('SIGKILL');
    await Promise.all([nats.dispose(), mongo.dispose()]);
    if (postgresDb) execFileSync('psql', [POSTGRES, '-qc', `drop database if exists ${postgresDb} with (force)`], { stdio: 'ignore' });
  }
}

const results = new Map<string, Timings>();
for (const backend of BACKENDS) results.set(backend, await benchBackend(backend));

const pad = (text: string, width: number) => text.padEnd(width);
for (const [backend, timings] of results) {
  console.log(
    `\nFerretDB on ${backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'}: milliseconds per operation (unless named) at each size (records in the scope, connections or keys in the environment, webhooks in the backlog, schedules due)\n`,
  );
  for (const [name, values] of timings) {
    const ratio = values.at(-1)![1] / Math.max(values[0]![1], 0.1);
    const cells = values.map(([size, ms]) => pad(`${size.toLocaleString('en')}: ${ms.toFixed(0)}`, 18)).join('');
    console.log(`${pad(name, 50)}${cells}${ratio.toFixed(1)}×${ratio <= 2 ? '' : '   (goal ≤ 2×: not met)'}`);
  }
}
