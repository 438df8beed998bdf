import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startMongo, startNats, uniqueDbName } from '@latchkey/testing';

/**
 * `make bench`: throughput and latency of a do-nothing handler behind the gateway's real key,
 * rate-limit and scope middleware, against the same handler without it in the same gateway
 * process, over HTTP, loaded by a separate process. Plain express serving the handler is shown
 * for context. Rounds alternate so drift on a shared machine hits every side alike; the
 * ratios, not the absolute numbers, are the result. The connection fetch runs through the real
 * credential vault (NATS, FerretDB, decryption) beside the do-nothing route, in the same run. Where `taskset` exists and there are two or
 * more cores, the server and the load generator get a core each, so the load generator's own
 * work (parsing the extra headers, for one) is not charged to the server.
 */
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const DURATION_S = Number(process.env['BENCH_SECONDS'] ?? 4);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 32);

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

function hasTaskset(): boolean {
  if (availableParallelism() < 2) return false;
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return true;
  } catch {
    return false;
  }
}
const pinned = hasTaskset();
const onCore = (core: number, args: string[]): [string, string[]] =>
  pinned ? ['taskset', ['-c', String(core), process.execPath, ...args]] : [process.execPath, args];

function startServer(mode: string, env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const [command, args] = onCore(0, [here('./servers.js'), mode]);
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    child.once('exit', (code) => reject(new Error(`${mode} server exited with ${code}`)));
    child.stdout?.once('data', (chunk: Buffer) => resolve({ child, port: Number(chunk.toString().trim()) }));
  });
}

function load(url: string, token: string | undefined, durationS: number): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const [command, args] = onCore(1, [here('./load.js'), JSON.stringify({ url, token, connections: CONNECTIONS, durationS })]);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as LoadResult) : reject(new Error(`load exited with ${code}`))));
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/**
 * FerretDB's SQLite backend scans a collection for any filter but `_id`; its PostgreSQL backend
 * uses indexes, as MongoDB does. Where a local PostgreSQL answers, the benchmark uses it.
 */
function choosePostgres(): string | undefined {
  if (process.env['FERRETDB_POSTGRES_URL']) return process.env['FERRETDB_POSTGRES_URL'];
  try {
    execFileSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-tAc', 'select 1'], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  try {
    execFileSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-c', 'create database ferretdb'], { stdio: 'ignore' });
  } catch {
    // exists already
  }
  return 'postgres://postgres@127.0.0.1:5432/ferretdb';
}
const postgres = choosePostgres();
if (postgres) process.env['FERRETDB_POSTGRES_URL'] = postgres;

const [nats, mongo] = await Promise.all([startNats(), startMongo()]);
const token = `lk_sk_${randomBytes(32).toString('base64url')}`;
const plain = await startServer('express', {});
// The credential vault, as a real service process, for the connection fetch.
const vault = spawn(process.execPath, [here('../../../credential-vault/dist/main.js')], {
  env: {
    ...process.env,
    NATS_URL: nats.url,
    MONGODB_URI: mongo.uri,
    MONGODB_DB: uniqueDbName('bench_vault'),
    ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
    HEALTH_PORT: '0',
    LOG_LEVEL: 'error',
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const gateway = await startServer('gateway', {
  NATS_URL: nats.url,
  MONGODB_URI: mongo.uri,
  MONGODB_DB: uniqueDbName('bench_gateway'),
  ADMIN_TOKEN: randomBytes(24).toString('base64url'),
  API_KEY_DIGEST_SECRET: randomBytes(24).toString('base64url'),
  BOOTSTRAP_SECRET_KEY: token,
  RATE_LIMIT_PER_MINUTE: '1000000000',
});
const connectionPath = await seedConnection(`http://127.0.0.1:${gateway.port}`, token);
const targets = {
  auth: { label: 'gateway, key + rate limit + scope', url: `http://127.0.0.1:${gateway.port}/bench`, token },
  open: { label: 'gateway, same handler, no auth', url: `http://127.0.0.1:${gateway.port}/bench-open`, token: undefined },
  express: { label: 'plain express, handler alone', url: `http://127.0.0.1:${plain.port}/bench`, token: undefined },
  connection: { label: 'GET /connections/{id} (fresh, creds)', url: `http://127.0.0.1:${gateway.port}${connectionPath}`, token },
} as const;

/** An OAuth 2 connection whose token is far from expiry, read with a credentials scope. */
async function seedConnection(base: string, key: string): Promise<string> {
  const call = async (path: string, body: unknown) => {
    for (let attempt = 0; attempt < 100; attempt++) {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (response.status !== 503) {
        if (response.status >= 300) throw new Error(`${path}: ${response.status} ${await response.text()}`);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 100)); // the vault is still starting
    }
  };
  await call('/integrations', { provider: 'github', unique_key: 'bench', credentials: { client_id: 'id', client_secret: 'secret' } });
  const expiresAt = new Date(Date.now() + 24 * 3600_000).toISOString();
  await call('/connections', {
    provider_config_key: 'bench',
    connection_id: 'bench-connection',
    credentials: { type: 'OAUTH2', access_token: randomBytes(24).toString('hex'), refresh_token: randomBytes(24).toString('hex'), expires_at: expiresAt, raw: {} },
  });
  return '/connections/bench-connection?provider_config_key=bench';
}
type Target = keyof typeof targets;

try {
  // Warm up (JIT, key cache, the first rate-limit slice) and check every side answers 2xx.
  for (const target of Object.values(targets)) {
    const warm = await load(target.url, target.token, 2);
    if (warm.non2xx > 0 || warm.errors > 0) throw new Error(`${target.url} answered ${warm.non2xx} non-2xx and ${warm.errors} errors`);
  }
  const names = Object.keys(targets) as Target[];
  const results = Object.fromEntries(names.map((name) => [name, [] as LoadResult[]])) as Record<Target, LoadResult[]>;
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) results[name].push(await load(targets[name].url, targets[name].token, DURATION_S));
  }
  const summary = (name: Target) => ({
    rps: median(results[name].map((result) => result.rps)),
    p50: median(results[name].map((result) => result.p50)),
    p99: median(results[name].map((result) => result.p99)),
  });
  const rows = Object.fromEntries(names.map((name) => [name, summary(name)])) as Record<Target, ReturnType<typeof summary>>;
  const pad = (text: string, width: number) => text.padEnd(width);
  console.log(
    `\nGateway API-key middleware (${ROUNDS} rounds × ${DURATION_S} s, ${CONNECTIONS} connections, medians; ` +
      `${pinned ? 'server and load generator on one core each' : 'cores shared'}; FerretDB on ${postgres ? 'PostgreSQL' : 'SQLite'})\n`,
  );
  console.log(`${pad('', 38)}${pad('req/s', 10)}${pad('p50 ms', 9)}p99 ms`);
  for (const name of names) {
    const row = rows[name];
    console.log(`${pad(targets[name].label, 38)}${pad(row.rps.toFixed(0), 10)}${pad(String(row.p50), 9)}${row.p99}`);
  }
  const ratio = rows.auth.rps / rows.open.rps;
  console.log(`\nthroughput with auth / without: ${ratio.toFixed(3)}   (goal >= 0.95: ${ratio >= 0.95 ? 'met' : 'not met'})`);
  console.log(`p50 with / without: ${(rows.auth.p50 / Math.max(rows.open.p50, 1)).toFixed(2)}   p99 with / without: ${(rows.auth.p99 / Math.max(rows.open.p99, 1)).toFixed(2)}`);
  console.log(`whole gateway stack / plain express: ${(rows.auth.rps / rows.express.rps).toFixed(3)}`);
  const fetchRatio = rows.connection.rps / rows.auth.rps;
  console.log(
    `GET /connections/{id} / do-nothing authenticated route: ${fetchRatio.toFixed(3)}   (goal >= 0.5: ${fetchRatio >= 0.5 ? 'met' : 'not met'}); ` +
      `p99 ${rows.connection.p99} ms vs ${rows.auth.p99} ms`,
  );
} finally {
  plain.child.kill('SIGKILL');
  gateway.child.kill('SIGKILL');
  vault.kill('SIGKILL');
  await Promise.all([nats.dispose(), mongo.dispose()]);
}
