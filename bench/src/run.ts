import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { cpuPerCall, processesWhere, type ProcessGroups } from './cpu.js';
import { benchRecords } from './records.js';
import { formatProfile, summarizeProfiles } from './profile.js';
import { freePort, repoRoot, startMongo, startNats, startUpstreamApi, uniqueDbName } from '@latchkey/testing';
import type { ServiceName } from '@latchkey/contracts';

/**
 * `make bench`: throughput and latency of the gateway's real key, rate-limit and scope
 * middleware, over HTTP, loaded by a separate process. Every service runs from its built
 * `dist/main.js`, as a user runs it. The authenticated side is `GET /environment-variables`
 * (key cache, rate limiter, scope check, then the key's environment, held in memory); the side
 * without auth is `GET /health`, which answers from the process. Neither leaves the gateway for
 * another service, so their ratio is what the middleware costs. Plain express serving a do-nothing handler is shown for context. Rounds alternate so
 * drift on a shared machine hits every side alike; the ratios, not the absolute numbers, are the
 * result. The connection fetch runs through the real credential vault (NATS, FerretDB,
 * decryption) in the same run. Where `taskset` exists and there are two or more cores, the
 * gateway and the load generator get a core each, so the load generator's own work (parsing the
 * extra headers, for one) is not charged to the server.
 */
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
/** A service's entry point, as built by `make build`. */
const entry = (service: ServiceName) => join(repoRoot(), 'services', service, 'dist', 'main.js');
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const DURATION_S = Number(process.env['BENCH_SECONDS'] ?? 4);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 32);
/**
 * Seconds of load each target gets before the measured rounds. V8 goes on compiling a server's
 * hot code for many seconds under load (the gateway spent a quarter of its CPU in compiler
 * threads ten seconds in, 3 % thirty seconds in): a short warm-up measures start-up rather than
 * the steady state a service runs in.
 */
const WARMUP_S = Number(process.env['BENCH_WARMUP_SECONDS'] ?? 20);
/**
 * BENCH_RATE=<requests per second>: the measured rounds offer that rate, in total, instead of
 * as many requests as the server answers. Throughput then says nothing; what it is for is the CPU
 * per call of (c) and (d) at one and the same rate: at saturation, each side batches as deeply as
 * its own speed allows and the machine's other work squeezes in unevenly.
 */
const RATE = process.env['BENCH_RATE'] ? Number(process.env['BENCH_RATE']) : undefined;
/**
 * BENCH_PROFILE=<dir>: the gateway and the proxy replicas run under V8's CPU profiler
 * (`--cpu-prof`, profiles in <dir>), and at the end the bench prints where their CPU time went,
 * per proxied call. Use it with BENCH_ONLY=latchkey, so the gateway's profile holds proxy calls only.
 */
const PROFILE_DIR = process.env['BENCH_PROFILE'];
/**
 * The measured rounds, on the profiles' clock; and the calls made in them: the proxied ones, or,
 * when BENCH_ONLY names one target, that target's (to profile one route of the gateway alone).
 */
const profileWindow = { fromUs: 0, toUs: 0 };
let callsInRounds = 0;
/** The target whose calls `callsInRounds` counts. */
let counted: string = 'latchkey';
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const profiled = (name: string) => (PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${name}-${process.pid}.cpuprofile`] : []);

type PostRequest = { method: 'POST'; body: string; contentType: string };

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

function startServer(mode: string, env: Record<string, string>, extra: string[] = [], flags: string[] = []): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const [command, args] = onCore(0, [...flags, here('./servers.js'), mode, ...extra]);
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    child.once('exit', (code) => reject(new Error(`${mode} server exited with ${code}`)));
    child.stdout?.once('data', (chunk: Buffer) => resolve({ child, port: Number(chunk.toString().trim()) }));
  });
}

function load(
  url: string,
  token: string | undefined,
  durationS: number,
  headers: Record<string, string> = {},
  request?: PostRequest,
  connections = CONNECTIONS,
  rate?: number,
): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const [command, args] = onCore(1, [here('./load.js'), JSON.stringify({ url, token, headers, connections, durationS, request, rate })]);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load exited with ${code}`));
      resolve(JSON.parse(out) as LoadResult);
    });
  });
}

function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432';

/**
 * FerretDB's SQLite backend scans a collection for any filter but `_id`; its PostgreSQL backend
 * uses indexes, as MongoDB does. Where a local PostgreSQL answers, the benchmark uses a database
 * of its own there, dropped when it ends: FerretDB keeps looking over every schema of its
 * database (metadata and index checks), so one shared database that kept each run's eight
 * service databases had FerretDB's checks cost more CPU with every run.
 */
function choosePostgres(): { url: string; owned: string | undefined } | undefined {
  const given = process.env['FERRETDB_POSTGRES_URL'];
  if (given) return { url: given, owned: undefined };
  const owned = uniqueDbName('bench');
  try {
    execFileSync('psql', [LOCAL_POSTGRES, '-qc', `create database ${owned}`], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  return { url: `${LOCAL_POSTGRES}/${owned}`, owned };
}
const postgres = choosePostgres();
if (postgres) process.env['FERRETDB_POSTGRES_URL'] = postgres.url;

const [nats, mongo, upstream] = await Promise.all([startNats(), startMongo(), startUpstreamApi()]);
const token = `lk_sk_${randomBytes(32).toString('base64url')}`;
const plain = await startServer('express', {});
const reverseProxy = await startServer('reverse-proxy', {}, [upstream.url]);
// The proxy's process hops with none of its work: an HTTP front and two NATS forwarders.
// The hop servers use subjects of their own: they log in as the test server's observer.
const observer = nats.credentials('observer');
const observerUrl = nats.url.replace('nats://', `nats://${observer.user}:${observer.password}@`);
const hopFront = await startServer('hop-front', {}, [observerUrl], profiled('hop-front'));
const hopBacks = [0, 1].map((back) =>
  spawn(process.execPath, [...profiled(`hop-back-${back}`), here('./servers.js'), 'hop-back', observerUrl, upstream.url], { stdio: ['ignore', 'ignore', 'inherit'] }),
);
const providersFile = join(mkdtempSync(join(tmpdir(), 'latchkey-bench-')), 'providers.yaml');
writeFileSync(
  providersFile,
  `bench-upstream:\n  display_name: Bench upstream\n  categories: [test]\n  auth_mode: API_KEY\n  proxy:\n    base_url: ${upstream.url}\n    headers:\n      X-Api-Key: \${apiKey}\n`,
);
const serviceEnv = { NATS_URL: nats.url, MONGODB_URI: mongo.uri, HEALTH_PORT: '0', LOG_LEVEL: 'error' };
const natsPassword = (service: ServiceName) => ({ NATS_PASSWORD: nats.credentials(service).password });
// Two proxy replicas, as operators would run them.
const proxies = [0, 1].map((replica) =>
  spawn(process.execPath, [...profiled(`proxy-${replica}`), entry('proxy')], {
    env: { ...process.env, ...serviceEnv, ...natsPassword('proxy'), MONGODB_DB: uniqueDbName('bench_proxy'), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    stdio: ['ignore', 'ignore', 'inherit'],
  }),
);
// The credential vault, as a real service process, for the connection fetch.
const vault = spawn(process.execPath, [entry('credential-vault')], {
  env: {
    ...process.env,
    NATS_URL: nats.url,
    ...natsPassword('credential-vault'),
    MONGODB_URI: mongo.uri,
    MONGODB_DB: uniqueDbName('bench_vault'),
    ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
    PROVIDERS_FILE: providersFile,
    HEALTH_PORT: '0',
    LOG_LEVEL: 'error',
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const adminToken = randomBytes(24).toString('base64url');
// Actions: the sync-scheduler (deployed functions) and the action-runner (the sandbox).
const functionDbs = { 'sync-scheduler': uniqueDbName('bench_sync_scheduler'), 'action-runner': uniqueDbName('bench_action_runner') };
const functionServices = (['sync-scheduler', 'action-runner'] as const).map((service) =>
  spawn(process.execPath, ['--no-node-snapshot', entry(service)], {
    env: { ...process.env, ...serviceEnv, ...natsPassword(service), MONGODB_DB: functionDbs[service] },
    stdio: ['ignore', 'ignore', 'inherit'],
  }),
);
const gateway = await startGateway({
  NATS_URL: nats.url,
  ...natsPassword('gateway'),
  MONGODB_URI: mongo.uri,
  MONGODB_DB: uniqueDbName('bench_gateway'),
  ADMIN_TOKEN: adminToken,
  API_KEY_DIGEST_SECRET: randomBytes(24).toString('base64url'),
  SETTINGS_ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
  BOOTSTRAP_SECRET_KEY: token,
  RATE_LIMIT_PER_MINUTE: '1000000000',
  WEBHOOK_INGEST_BYTES_PER_MINUTE: '1000000000000',
});

/** The gateway from its `dist/main.js` on a free port, on the server's core; resolves once `/health` answers. */
async function startGateway(env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const [command, args] = onCore(0, [...profiled('gateway'), entry('gateway')]);
  const child = spawn(command, args, {
    env: { ...process.env, ...env, PORT: String(port), HEALTH_PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'error' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let attempt = 0; attempt < 600; attempt++) {
    if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}`);
    if ((await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok) return { child, port };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the gateway did not answer /health within 60 s');
}
const connectionPath = await seedConnection(`http://127.0.0.1:${gateway.port}`, token);
const proxied = { 'connection-id': 'bench-proxy', 'provider-config-key': 'bench-proxy' };
await seedAction(`http://127.0.0.1:${gateway.port}`, token);
const targets: Record<string, { label: string; url: string; token: string | undefined; headers?: Record<string, string>; request?: PostRequest }> = {
  auth: { label: 'GET /environment-variables (key)', url: `http://127.0.0.1:${gateway.port}/environment-variables`, token },
  open: { label: 'GET /health (no auth)', url: `http://127.0.0.1:${gateway.port}/health`, token: undefined },
  express: { label: 'plain express, handler alone', url: `http://127.0.0.1:${plain.port}/bench`, token: undefined },
  connection: { label: 'GET /connections/{id} (fresh, creds)', url: `http://127.0.0.1:${gateway.port}${connectionPath}`, token },
  direct: { label: '(a) upstream called directly', url: `${upstream.url}/echo`, token: undefined },
  reverse: { label: '(b) plain reverse proxy', url: `http://127.0.0.1:${reverseProxy.port}/echo`, token: undefined },
  latchkey: { label: '(c) Latchkey proxy, 2 replicas', url: `http://127.0.0.1:${gateway.port}/proxy/echo`, token, headers: proxied },
  hop: { label: '(d) bare NATS hop, 2 forwarders', url: `http://127.0.0.1:${hopFront.port}/echo`, token: undefined },
  action: {
    label: 'POST /action/trigger, do-nothing',
    url: `http://127.0.0.1:${gateway.port}/action/trigger`,
    token,
    headers: proxied,
    request: { method: 'POST', body: JSON.stringify({ action_name: 'noop' }), contentType: 'application/json' },
  },
};

/**
 * Deploys `noop`, an action that returns `{ok: true}`, for the bench-proxy connection. The
 * bundle is what esbuild makes of `defineAction({name: 'noop', exec: () => ({ok: true})})`.
 */
async function seedAction(base: string, key: string): Promise<void> {
  const bundle = `"use strict";module.exports={default:{kind:"action",name:"noop",exec:()=>({ok:true})}};`;
  for (let attempt = 0; attempt < 100; attempt++) {
    const response = await fetch(`${base}/functions/deployments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ provider_config_key: 'bench-proxy', functions: [{ description: { type: 'action', name: 'noop', has_input_schema: false }, bundle }] }),
    });
    if (response.status === 201) return;
    if (response.status !== 503) throw new Error(`deploying the bench action: ${response.status} ${await response.text()}`);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the sync-scheduler is still starting
  }
}

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
  await call('/integrations', { provider: 'bench-upstream', unique_key: 'bench-proxy' });
  await call('/connections', { provider_config_key: 'bench-proxy', connection_id: 'bench-proxy', credentials: { type: 'API_KEY', apiKey: 'bench-key' } });
  const expiresAt = new Date(Date.now() + 24 * 3600_000).toISOString();
  await call('/connections', {
    provider_config_key: 'bench',
    connection_id: 'bench-connection',
    credentials: { type: 'OAUTH2', access_token: randomBytes(24).toString('hex'), refresh_token: randomBytes(24).toString('hex'), expires_at: expiresAt, raw: {} },
  });
  return '/connections/bench-connection?provider_config_key=bench';
}
type Target = string;

// ---- webhook ingest: POST /webhook/{env}/{integration} with the webhook router running. The
// gateway answers once the raw request is stored on JetStream; the router verifies and routes
// meanwhile (the environment has no webhook URL, so nothing is forwarded). Compared with the
// `GET /health` (no auth), since webhooks carry no API key either.
const webhookRouter = spawn(process.execPath, [entry('webhook-router')], {
  env: { ...process.env, ...serviceEnv, ...natsPassword('webhook-router'), MONGODB_DB: uniqueDbName('bench_webhooks') },
  stdio: ['ignore', 'ignore', 'inherit'],
});
targets['ingest'] = await webhookIngestTarget(`http://127.0.0.1:${gateway.port}`);

async function webhookIngestTarget(base: string) {
  const environments = (await (await fetch(`${base}/admin/environments`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as {
    data: Array<{ name: string; public_id: string }>;
  };
  const publicId = environments.data.find((environment) => environment.name === 'dev')!.public_id;
  await fetch(`${base}/integrations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    // The load repeats one unsigned body: the router takes the first and refuses the rest as
    // replays, each batch paying for its signature check and its claim insert.
    body: JSON.stringify({ provider: 'bench-upstream', unique_key: 'bench-hooks', accept_unsigned_webhooks: true }),
  });
  const body = JSON.stringify({ event: 'contact.updated', serviceConnectionId: 'bench-proxy', data: { id: 42, fields: { name: 'Ada', plan: 'pro' } } });
  return {
    label: 'POST /webhook/… (ingest)',
    url: `${base}/webhook/${publicId}/bench-hooks`,
    token: undefined,
    request: { method: 'POST' as const, body, contentType: 'application/json' },
  };
}

/**
 * The router verifies, stores and routes what the ingest target accepted after the gateway has
 * answered. On this machine it shares the cores with everything else, so each ingest load waits
 * for the router to catch up before the next target is measured, and no measurement pays for
 * another's backlog.
 */
const benchNats = await connect({ servers: nats.url, user: observer.user, pass: observer.password });
async function settleIngest(): Promise<void> {
  const jsm = await jetstreamManager(benchNats);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const info = await jsm.consumers.info('JOBS', 'webhook-router-inbound').catch(() => undefined);
    if (!info || (info.num_pending === 0 && info.num_ack_pending === 0) || Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function reportWebhookIngest(row: (name: string) => { rps: number; p50: number; p99: number }): void {
  const ratio = row('ingest').rps / row('open').rps;
  console.log(
    `webhook ingest / GET /health (no auth): ${ratio.toFixed(3)}   (goal >= 0.5: ${ratio >= 0.5 ? 'met' : 'not met'}); ` +
      `p99 ${row('ingest').p99} ms vs ${row('open').p99} ms`,
  );
}

/**
 * The proxy's figures. Under 32 connections a closed loop's p50 is about connections over
 * throughput, so it restates the throughput ratio; the latency one call adds is also measured
 * alone: one connection, where the mean latency is exactly 1 / throughput (in µs, finer than the
 * load generator's millisecond histogram). (d) shows what the design's process hops cost on
 * this machine with no work at all: (d) / (b) is the ceiling for (c) / (b) here.
 */
async function reportProxy(row: (name: string) => { rps: number; p50: number; p99: number }, withHop: boolean): Promise<void> {
  const proxyRatio = row('latchkey').rps / row('reverse').rps;
  const added = row('latchkey').p50 - row('direct').p50;
  const plainAdded = row('reverse').p50 - row('direct').p50;
  console.log(`proxy throughput (c) / (b): ${proxyRatio.toFixed(3)}   (goal >= 0.6: ${proxyRatio >= 0.6 ? 'met' : 'not met'})`);
  console.log(
    `proxy added p50: (c - a) = ${added} ms, (b - a) = ${plainAdded} ms   (goal (c - a) <= 2 × (b - a): ${added <= 2 * Math.max(plainAdded, 0.5) ? 'met' : 'not met'})`,
  );
  if (withHop) {
    console.log(
      `bare hop (d) / (b): ${(row('hop').rps / row('reverse').rps).toFixed(3)} (the ceiling of (c) / (b) on this machine); ` +
        `(c) / (d): ${(row('latchkey').rps / row('hop').rps).toFixed(3)} (what the proxy's own work costs)`,
    );
  }
  const alone: Record<string, number[]> = {};
  const sides = ['direct', 'reverse', 'latchkey', ...(withHop ? ['hop'] : [])];
  for (let round = 0; round < 3; round++) {
    for (const name of sides) {
      const target = targets[name]!;
      const result = await load(target.url, target.token, 2, target.headers, target.request, 1);
      (alone[name] ??= []).push(1e6 / result.rps);
    }
  }
  const us = (name: string) => median(alone[name]!);
  const aloneAdded = us('latchkey') - us('direct');
  const plainAloneAdded = us('reverse') - us('direct');
  console.log(
    `one call alone (1 connection, mean µs): (a) ${us('direct').toFixed(0)}, (b) ${us('reverse').toFixed(0)}, (c) ${us('latchkey').toFixed(0)}` +
      `${withHop ? `, (d) ${us('hop').toFixed(0)}` : ''}; added (c - a) = ${aloneAdded.toFixed(0)} µs, (b - a) = ${plainAloneAdded.toFixed(0)} µs ` +
      `(goal (c - a) <= 2 × (b - a): ${aloneAdded <= 2 * plainAloneAdded ? 'met' : 'not met'})` +
      `${withHop ? `; the bare hop adds ${(us('hop') - us('direct')).toFixed(0)} µs` : ''}`,
  );
}

/**
 * The processes of the proxy's two sides whose CPU each round of (c) and (d) adds up: the
 * gateway and the replicas, the hop's front and forwarders (the NATS server, the upstream and the
 * load generator serve both alike). `taskset` runs the command in its own process, so the pid is
 * the server's.
 */
const cpuGroups: Record<string, ProcessGroups> = {
  latchkey: { gateway: [gateway.child.pid], replicas: proxies.map((proxy) => proxy.pid) },
  hop: { front: [hopFront.child.pid], forwarders: hopBacks.map((back) => back.pid) },
};
const cpuRounds: Record<string, Array<Record<string, number>>> = {};

/**
 * The processes both sides share, counted apart in each round of (c) and (d): with the side's own
 * processes they make up most of the whole machine's CPU per call (the load generator and the
 * kernel's work for it, the rest), so the two sides' difference shows where it is. Found once the
 * warm-up has opened FerretDB's connections to PostgreSQL.
 */
function sharedProcesses(): ProcessGroups {
  const database = postgres ? new URL(postgres.url).pathname.slice(1) : undefined;
  const others = [vault, ...functionServices, webhookRouter].map((child) => child.pid);
  return {
    'NATS server': processesWhere(({ parent, program }) => parent === process.pid && program === 'nats-server'),
    database: processesWhere(
      ({ parent, program, commandLine }) =>
        (parent === process.pid && program === 'ferretdb') || (database !== undefined && commandLine.startsWith('postgres: ') && commandLine.includes(` ${database} `)),
    ),
    'the upstream and the bench': [process.pid],
    'the services neither calls': others,
  };
}
let shared: ProcessGroups = {};

/**
 * The proxy's own work by CPU: what the gateway and the replicas spend per call against what the
 * hop's front and forwarders spend, medians of the rounds. Throughput on a shared machine moves
 * with whatever else runs (up to fourfold between runs of one day here); CPU per call far less, so this
 * says whether a change cut the proxy's work when the throughput ratio cannot.
 */
function reportProxyCpu(): void {
  const ofSide = (name: string) => {
    const rounds = cpuRounds[name];
    if (!rounds || rounds.length === 0) return undefined;
    return Object.fromEntries(Object.keys(rounds[0]!).map((group) => [group, median(rounds.map((round) => round[group]!))]));
  };
  const c = ofSide('latchkey');
  const d = ofSide('hop');
  if (!c || !d) return;
  const processes = (side: Record<string, number>) => Object.entries(side).filter(([group]) => group !== 'machine' && !(group in shared));
  const sharedParts = (side: Record<string, number>) => Object.keys(shared).map((group) => `${group} ${side[group]!.toFixed(0)}`).join(', ');
  const total = (side: Record<string, number>) => processes(side).reduce((sum, [, us]) => sum + us, 0);
  const parts = (side: Record<string, number>) => processes(side).map(([group, us]) => `${group} ${us.toFixed(0)}`).join(' + ');
  console.log(
    `CPU per call (µs, /proc, medians of the rounds): (c) ${parts(c)} = ${total(c).toFixed(0)}; (d) ${parts(d)} = ${total(d).toFixed(0)}; ` +
      `by CPU, (d) / (c): ${(total(d) / total(c)).toFixed(3)}`,
  );
  if (Object.keys(shared).length > 0) console.log(`processes both share, per call (µs, /proc): (c) ${sharedParts(c)}; (d) ${sharedParts(d)}`);
  const machineC = c['machine'];
  const machineD = d['machine'];
  if (machineC !== undefined && machineD !== undefined) {
    console.log(
      `whole machine per call (µs, every process: load generator, upstream and NATS server too): (c) ${machineC.toFixed(0)}; (d) ${machineD.toFixed(0)}; ` +
        `(d) / (c): ${(machineD / machineC).toFixed(3)}, what (c) / (d) tends to when the machine is saturated`,
    );
  }
}

// BENCH_ONLY=direct,reverse,latchkey measures a subset (and prints only the ratios it has both sides of).
const only = process.env['BENCH_ONLY']?.split(',');
if (only) for (const name of Object.keys(targets)) if (!only.includes(name)) delete targets[name];

try {
  // Warm up (JIT, key cache, the first rate-limit slice) and check every side answers 2xx.
  for (const target of Object.values(targets)) {
    const warm = await load(target.url, target.token, WARMUP_S, target.headers, target.request);
    if (warm.non2xx > 0 || warm.errors > 0) throw new Error(`${target.url} answered ${warm.non2xx} non-2xx and ${warm.errors} errors`);
  }
  await settleIngest();
  shared = sharedProcesses();
  const names = Object.keys(targets) as Target[];
  const results = Object.fromEntries(names.map((name) => [name, [] as LoadResult[]])) as Record<Target, LoadResult[]>;
  profileWindow.fromUs = nowUs();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const run = () => load(targets[name]!.url, targets[name]!.token, DURATION_S, targets[name]!.headers, targets[name]!.request, CONNECTIONS, RATE);
      const groups = cpuGroups[name];
      if (groups) {
        const { result, usPerCall } = await cpuPerCall(groups, run, (loaded) => loaded.rps * DURATION_S, shared);
        results[name]!.push(result);
        if (usPerCall) (cpuRounds[name] ??= []).push(usPerCall);
      } else {
        results[name]!.push(await run());
      }
      if (name === 'ingest') await settleIngest();
    }
  }
  profileWindow.toUs = nowUs();
  counted = names.length === 1 ? names[0]! : 'latchkey';
  const countedResults = results[counted as Target];
  if (countedResults) callsInRounds = countedResults.reduce((sum, result) => sum + Math.round(result.rps * DURATION_S), 0);
  const summary = (name: Target) => ({
    rps: median(results[name]!.map((result) => result.rps)),
    p50: median(results[name]!.map((result) => result.p50)),
    p99: median(results[name]!.map((result) => result.p99)),
  });
  const rows = Object.fromEntries(names.map((name) => [name, summary(name)])) as Record<Target, ReturnType<typeof summary>>;
  const row = (name: string) => rows[name]!;
  const pad = (text: string, width: number) => text.padEnd(width);
  console.log(
    `\nGateway API-key middleware (${ROUNDS} rounds × ${DURATION_S} s, ${CONNECTIONS} connections, medians; ` +
      `${pinned ? 'server and load generator on one core each' : 'cores shared'}; FerretDB on ${postgres ? 'PostgreSQL' : 'SQLite'})\n`,
  );
  console.log(`${pad('', 38)}${pad('req/s', 10)}${pad('p50 ms', 9)}p99 ms`);
  for (const name of names) {
    console.log(`${pad(targets[name]!.label, 38)}${pad(row(name).rps.toFixed(0), 10)}${pad(String(row(name).p50), 9)}${row(name).p99}`);
  }
  const has = (...needed: string[]) => needed.every((name) => name in rows);
  if (has('auth', 'open', 'express', 'connection')) {
    const ratio = row('auth').rps / row('open').rps;
    console.log(`\nthroughput with auth (/environment-variables) / without (/health): ${ratio.toFixed(3)}   (goal >= 0.95: ${ratio >= 0.95 ? 'met' : 'not met'})`);
    console.log(`p50 with / without: ${(row('auth').p50 / Math.max(row('open').p50, 1)).toFixed(2)}   p99 with / without: ${(row('auth').p99 / Math.max(row('open').p99, 1)).toFixed(2)}`);
    console.log(`whole gateway stack / plain express: ${(row('auth').rps / row('express').rps).toFixed(3)}`);
    const fetchRatio = row('connection').rps / row('auth').rps;
    console.log(
      `GET /connections/{id} / GET /environment-variables: ${fetchRatio.toFixed(3)}   (goal >= 0.5: ${fetchRatio >= 0.5 ? 'met' : 'not met'}); ` +
        `p99 ${row('connection').p99} ms vs ${row('auth').p99} ms`,
    );
  }
  if (has('ingest', 'open')) reportWebhookIngest(row);
  reportProxyCpu();
  if (has('direct', 'reverse', 'latchkey')) await reportProxy(row, has('hop'));
  if (has('auth', 'action')) {
    console.log(
      `sync action round-trip / GET /environment-variables: ${(row('action').rps / row('auth').rps).toFixed(3)}; ` +
        `p99 ${row('action').p99} ms vs ${row('auth').p99} ms (dispatch to the action-runner, the connection check, a warm isolate, the reply)`,
    );
  }
  if (!only || only.includes('records')) {
    const records = await benchRecords({
      natsUrl: nats.url,
      natsIdentity: nats.credentials('action-runner'),
      mongoUri: mongo.uri,
      dbName: functionDbs['sync-scheduler'],
      gatewayUrl: `http://127.0.0.1:${gateway.port}`,
      apiKey: token,
      adminToken,
      connection: { connection_id: 'bench-proxy', provider_config_key: 'bench-proxy' },
      rounds: Math.min(ROUNDS, 3),
    });
    const write = median(records.apiWrite) / median(records.plainWrite);
    const read = median(records.apiRead) / median(records.plainRead);
    console.log(
      `\nrecords saved/s: records.write ${median(records.apiWrite).toFixed(0)} vs insertMany ${median(records.plainWrite).toFixed(0)}: ${write.toFixed(3)}   (goal >= 0.5: ${write >= 0.5 ? 'met' : 'not met'})`,
    );
    console.log(
      `records read/s: GET /records ${median(records.apiRead).toFixed(0)} vs find ${median(records.plainRead).toFixed(0)}: ${read.toFixed(3)}   (goal >= 0.5: ${read >= 0.5 ? 'met' : 'not met'})`,
    );
  }
} finally {
  for (const service of functionServices) service.kill('SIGKILL');
  plain.child.kill('SIGKILL');
  reverseProxy.child.kill('SIGKILL');
  // Profiled processes stop as on SIGTERM, so that V8 writes their profiles.
  const stopping = [...proxies, gateway.child, hopFront.child, ...hopBacks].map((child) => stopProcess(child, PROFILE_DIR ? 'SIGTERM' : 'SIGKILL'));
  await Promise.all(stopping);
  if (PROFILE_DIR) {
    // The side measured: the hop's processes when it is the one target, else Latchkey's.
    const [backs, front] = counted === 'hop' ? (['hop-back-', 'hop-front-'] as const) : (['proxy-', 'gateway-'] as const);
    console.log(formatProfile(counted === 'hop' ? 'hop forwarders (both)' : 'proxy replicas (both)', summarizeProfiles(PROFILE_DIR, backs, profileWindow), callsInRounds));
    console.log(formatProfile(counted === 'hop' ? 'hop front' : 'gateway', summarizeProfiles(PROFILE_DIR, front, profileWindow), callsInRounds));
  }
  vault.kill('SIGKILL');
  webhookRouter.kill('SIGKILL');
  await benchNats.close();
  await Promise.all([nats.dispose(), mongo.dispose(), upstream.close()]);
  if (postgres?.owned) execFileSync('psql', [LOCAL_POSTGRES, '-qc', `drop database if exists ${postgres.owned} with (force)`], { stdio: 'ignore' });
}
