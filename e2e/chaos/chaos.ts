import { freePort, startOAuthServer, startUpstreamApi, type TestOAuthServer, type TestUpstreamApi, type TokenRequestRecord } from '@latchkey/testing';
import type { ServiceName, SyncStatusEntry } from '@latchkey/contracts';
import { deployWithCli, FUNCTIONS_DIR } from '../support/functions.js';
import { authorizationCodeTokens } from '../support/oauth.js';
import { apiKeyProviderYaml, writeProvidersFile } from '../support/providers.js';
import { http, startStack, type Stack } from '../support/stack.js';
import { ACME_PROVIDER_YAML, acmeSignature, startReceiver, webhookEnvironment, type Receiver } from '../support/webhooks.js';
import { startBalancer, type Balancer } from './balancer.js';

/**
 * The chaos suite: a steady mixed load through the gateways (a client-side load balancer in
 * front of them) while faults hit the stack one at a time, with recovery between; then what must
 * hold is checked per fault window. `e2e/chaos.e2e.test.ts` runs a short schedule, `make chaos`
 * (`e2e/dist/chaos/run.js`) the full one.
 */

export type OpKind = 'proxy-key' | 'proxy-oauth' | 'webhook' | 'action' | 'connect-session' | 'sync-trigger' | 'sync-status';

export interface Op {
  kind: OpKind;
  start: number;
  end: number;
  status: number | 'error' | 'hung';
  ok: boolean;
  /** The error code of a failed answer. */
  code?: string;
  /** The provider webhook's marker, or the async action's id. */
  key?: string;
}

export interface Fault {
  name: string;
  /** Injects the fault and undoes it (a restart); resolves when the stack runs whole again. */
  run(stack: Stack): Promise<void>;
}

export interface WindowReport {
  fault: string;
  proxyOk: number;
  proxyFailed: number;
  errorRate: number;
  /** From the fault to the end of the last failed proxy call in its window (0: none failed). */
  recoveryMs: number;
  webhooksAcked: number;
  webhooksLost: number;
  webhooksDuplicated: number;
  actionsAccepted: number;
  /** Accepted actions with no completion webhook at all: lost. */
  actionsIncomplete: number;
  /** Their ids, to look into. */
  incompleteActionIds: string[];
  /**
   * Accepted actions that completed once, as failed, with a coded error (their function's proxy
   * call met the fault): answered, not lost; the function decides whether to try again.
   */
  actionsFailed: number;
  /** The codes those failures carried. */
  actionFailureCodes: string[];
  /** Accepted actions that completed more than once (two completion webhooks of their own). */
  actionsDuplicated: number;
  deliveriesDuplicated: number;
  /** Webhook-ids sent again because the webhook-router replica that sent them was killed before recording it. */
  deliveriesResentAfterKill: number;
  /** Token requests per refresh token presented: 1 means one refresh per expiry. */
  tokenRequestsPerExpiry: number;
  refreshFailures: number;
  /** Refused refreshes that presented a token a vault replica had just used when it was killed (see LOST_AT_KILL_MS). */
  refreshesLostToKill: number;
  connectFailed: number;
  /** Runs of the `items` sync that finished in the window, as the operations log has them. */
  syncRunsOk: number;
  syncRunsFailed: number;
  /** `POST /sync/trigger` of the load answered other than 200. */
  syncTriggersFailed: number;
  /**
   * Runs of the `items` sync that finished in the window as `GET /sync/status` showed them
   * (its `finishedAt`, read every second): the runs themselves, whatever the operations log kept.
   */
  syncFinishesSeen: number;
  hung: number;
  /** Failed requests by kind, status and error code, to read next to the table. */
  failures: Record<string, number>;
}

/**
 * After the load: the records of the `items` sync against what the upstream serves, read with
 * `GET /records` page by page (`next_cursor` to the end) once a run started after the load has
 * finished.
 */
export interface RecordsReport {
  model: string;
  /** Items the upstream's cursor list serves (read from it directly). */
  served: number;
  /** Distinct ids of the live records paged through. */
  stored: number;
  /** Served items with no live record. */
  missing: number;
  /** Records met again on another page (or twice on one): each extra sighting counts. */
  repeated: number;
  /** Live records of ids the upstream does not serve. */
  unexpected: number;
  /** Records marked deleted (the sync deletes nothing, so none should be). */
  deleted: number;
  pages: number;
  pageSize: number;
  /** False when `next_cursor` still named a page after far more pages than the records fill. */
  pagingEnded: boolean;
  /** How the run triggered after the load ended: SUCCESS, or what it was instead. */
  finalRun: string;
}

export interface ChaosReport {
  /** One per fault window, the quiet start first. */
  windows: WindowReport[];
  records: RecordsReport;
  /** What `GET /sync/status` said of the load's sync, each time it changed (see `syncTimeline`). */
  syncStatuses: SyncStatusChange[];
}

/** A change in what the sync's status said during the load: when it was first read so, and what. */
export interface SyncStatusChange {
  at: number;
  status: string;
  finishedAt: string | null;
  error: string | null;
}

export interface ChaosOptions {
  /** Replicas of every service, gateways included. */
  replicas: number;
  natsCluster: boolean;
  faults: Fault[];
  /** Steady load before the first fault and after each recovery. */
  quietMs: number;
  log?: (line: string) => void;
}

/** Every request gets an answer or a coded error within this; past it the call counts as hung. */
const DEADLINE_MS = 20_000;
/** The vault refreshes a token within 15 minutes of its expiry: these expire 10 s after issue. */
const TOKEN_LIFETIME_S = 15 * 60 + 10;

/**
 * The sync in the load: the upstream's cursor list holds this many items, `UPSTREAM_PAGE_SIZE` a
 * page; the e2e functions' `items` sync (`e2e/functions/api/items.ts`) reads them all through
 * the proxy with `conn-1` and saves them as `Item` records.
 */
const SYNCED_ITEMS = 300;
const UPSTREAM_PAGE_SIZE = 20;
const SYNC = { provider_config_key: 'api', connection_id: 'conn-1', sync: 'items', model: 'Item' } as const;
/** Its schedule during the chaos run, besides the triggers of the load. */
const SYNC_FREQUENCY = '5s';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface ChaosRig {
  stack: Stack;
  upstream: TestUpstreamApi;
  oauth: TestOAuthServer;
  receiver: Receiver;
  balancer: Balancer;
  webhookEnv: { publicId: string; webhookSecret: string };
  /** Error lines the services logged, with the time and service, to read next to the table. */
  errors: string[];
  dispose(): Promise<void>;
}

export async function startRig(options: Pick<ChaosOptions, 'replicas' | 'natsCluster'>): Promise<ChaosRig> {
  const upstream = await startUpstreamApi({ paginationItems: SYNCED_ITEMS, pageSize: UPSTREAM_PAGE_SIZE });
  const oauth = await startOAuthServer({ expiresIn: TOKEN_LIFETIME_S });
  const receiver = await startReceiver(await freePort());
  const providers = [
    apiKeyProviderYaml(upstream.url),
    `loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n  proxy:\n    base_url: ${oauth.url}/api\n`,
    ACME_PROVIDER_YAML,
  ].join('');
  const replicas = Object.fromEntries((['credential-vault', 'proxy', 'sync-scheduler', 'action-runner', 'webhook-router'] as const).map((name) => [name, options.replicas]));
  const errors: string[] = [];
  const stack = await startStack({
    onOutput: (service, text) => {
      for (const line of text.split('\n')) if (line.includes('"level":"error"') || line.includes('"level":"warn"')) errors.push(`[${service}] ${line}`);
    },
    gateways: options.replicas,
    replicas,
    natsCluster: options.natsCluster,
    // A dozen processes start at once on a busy machine.
    readyTimeoutMs: 120_000,
    env: { PROVIDERS_FILE: writeProvidersFile(providers), PROXY_ALLOW_CIDRS: '127.0.0.1/32', SHUTDOWN_TIMEOUT_MS: '15000' },
    serviceEnv: {
      gateway: { SHUTDOWN_READY_DELAY_MS: '1000', RATE_LIMIT_PER_MINUTE: '10000000' },
      'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
      // The items sync runs on a schedule of seconds too.
      'sync-scheduler': { SYNC_MIN_FREQUENCY_MS: '1000' },
    },
  });
  const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
  const must = async (result: Promise<{ status: number; json: any }>, what: string) => {
    const { status, json } = await result;
    if (status >= 300) throw new Error(`${what}: ${status} ${JSON.stringify(json)}`);
  };
  await must(http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { webhook_url: receiver.url } }), 'webhook URL');
  await must(api('POST', '/integrations', { provider: 'loopback-api', unique_key: 'api' }), 'api integration');
  await must(api('POST', '/connections', { provider_config_key: 'api', connection_id: 'conn-1', credentials: { type: 'API_KEY', apiKey: 'k' } }), 'api connection');
  await must(api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', credentials: { client_id: 'test-client', client_secret: 'test-secret' } }), 'oauth integration');
  const tokens = await authorizationCodeTokens(oauth);
  const expiresAt = new Date(Date.now() + TOKEN_LIFETIME_S * 1000).toISOString();
  await must(
    api('POST', '/connections', { provider_config_key: 'oauth', connection_id: 'oauth-1', credentials: { type: 'OAUTH2', access_token: tokens.access_token, refresh_token: tokens.refresh_token, expires_at: expiresAt, raw: {} } }),
    'oauth connection',
  );
  await deployWithCli(FUNCTIONS_DIR, stack);
  await must(
    api('PUT', '/sync/update-connection-frequency', { provider_config_key: SYNC.provider_config_key, connection_id: SYNC.connection_id, sync_name: SYNC.sync, frequency: SYNC_FREQUENCY }),
    'items sync frequency',
  );
  const env = await webhookEnvironment(stack, 'chaos', receiver.url);
  const balancer = startBalancer(() => stack.gateways);
  return {
    stack,
    upstream,
    oauth,
    receiver,
    balancer,
    webhookEnv: { publicId: env.publicId, webhookSecret: env.webhookSecret },
    errors,
    dispose: async () => {
      balancer.stop();
      await stack.dispose();
      await Promise.all([upstream.close(), oauth.close(), receiver.close()]);
    },
  };
}

/** The steady load: a few workers per kind, each sending its next request when the last is answered. */
export function startLoad(rig: ChaosRig) {
  const ops: Op[] = [];
  const syncStatuses: SyncStatusChange[] = [];
  let running = true;
  let counter = 0;
  const { balancer, stack } = rig;
  const auth = { authorization: `Bearer ${stack.bootstrapKey}` };

  const timed = async (kind: OpKind, send: (signal: AbortSignal) => Promise<Response>, okStatus: number, key?: string, read?: (json: any) => string | undefined) => {
    const start = Date.now();
    const op: Op = { kind, start, end: start, status: 'error', ok: false, ...(key === undefined ? {} : { key }) };
    try {
      const response = await send(AbortSignal.timeout(DEADLINE_MS));
      const text = await response.text();
      op.status = response.status;
      op.ok = response.status === okStatus;
      if (!op.ok) op.code = safeCode(text) ?? '';
      if (op.ok && read) {
        const found = read(JSON.parse(text));
        if (found !== undefined) op.key = found;
      }
    } catch (error) {
      op.status = (error as { name?: string }).name === 'TimeoutError' ? 'hung' : 'error';
      op.code = String((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
    }
    op.end = Date.now();
    ops.push(op);
  };

  const worker = async (pauseMs: number, one: () => Promise<void>) => {
    while (running) {
      await one();
      if (pauseMs > 0) await sleep(pauseMs);
    }
  };

  const workers = [
    ...Array.from({ length: 3 }, () =>
      worker(0, () => timed('proxy-key', (signal) => balancer.fetch(`/proxy/echo/${counter++}`, { signal, headers: { ...auth, 'connection-id': 'conn-1', 'provider-config-key': 'api' } }), 200)),
    ),
    worker(50, () => timed('proxy-oauth', (signal) => balancer.fetch(`/proxy/things/${counter++}`, { signal, headers: { ...auth, 'connection-id': 'oauth-1', 'provider-config-key': 'oauth' } }), 200)),
    worker(100, () => {
      const marker = `wh-${counter++}`;
      const body = JSON.stringify({ marker, serviceConnectionId: 'none' });
      return timed(
        'webhook',
        (signal) =>
          balancer.fetch(`/webhook/${rig.webhookEnv.publicId}/acme`, {
            method: 'POST',
            signal,
            headers: { 'content-type': 'application/json', 'x-acme-signature-256': acmeSignature(rig.webhookEnv.webhookSecret, body) },
            body,
          }),
        200,
        marker,
      );
    }),
    worker(300, () =>
      timed(
        'action',
        (signal) =>
          balancer.fetch('/action/trigger', {
            method: 'POST',
            signal,
            headers: { ...auth, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'api', 'x-async': 'true' },
            body: JSON.stringify({ action_name: 'echo', input: { word: `a${counter++}` } }),
          }),
        202,
        undefined,
        (json: { id?: string }) => json.id,
      ),
    ),
    // Sync runs in flight while the faults hit: a trigger every few seconds (a no-op while a run
    // is in flight), every fourth a full resync, which clears the records and writes them all again.
    (() => {
      let triggers = 0;
      return worker(3000, () => {
        const fullResync = ++triggers % 4 === 0;
        const body = JSON.stringify({ provider_config_key: SYNC.provider_config_key, syncs: [SYNC.sync], connection_id: SYNC.connection_id, ...(fullResync ? { full_resync: true } : {}) });
        return timed('sync-trigger', (signal) => balancer.fetch('/sync/trigger', { method: 'POST', signal, headers: { ...auth, 'content-type': 'application/json' }, body }), 200);
      });
    })(),
    // What the sync's status says while the load runs: each run's end, as `finishedAt`.
    worker(1000, () => {
      const query = new URLSearchParams({ provider_config_key: SYNC.provider_config_key, syncs: SYNC.sync, connection_id: SYNC.connection_id });
      type Entry = { variant?: string; status?: string; finishedAt?: string | null; latestError?: { code?: string } | null };
      return timed('sync-status', (signal) => balancer.fetch(`/sync/status?${query}`, { signal, headers: auth }), 200, undefined, (json: { syncs?: Entry[] }) => {
        const entry = json.syncs?.find((each) => each.variant === 'base');
        const change: SyncStatusChange = { at: Date.now(), status: entry?.status ?? 'none', finishedAt: entry?.finishedAt ?? null, error: entry?.latestError?.code ?? null };
        const last = syncStatuses.at(-1);
        if (!last || last.status !== change.status || last.finishedAt !== change.finishedAt || last.error !== change.error) syncStatuses.push(change);
        return entry?.finishedAt ?? undefined;
      });
    }),
    worker(300, () => timed('connect-session', (signal) => balancer.fetch('/connect/sessions', { method: 'POST', signal, headers: { ...auth, 'content-type': 'application/json' }, body: '{}' }), 201)),
  ];

  return {
    ops,
    syncStatuses,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

interface Window {
  fault: string;
  from: number;
  to: number;
  tokenLog: [number, number];
}

/** Runs the load through the faults and reports each window (the quiet start is the first row), then the synced records. */
export async function runChaos(rig: ChaosRig, options: Omit<ChaosOptions, 'replicas' | 'natsCluster'>): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const load = startLoad(rig);
  const windows: Window[] = [];
  const mark = async (fault: string, body: () => Promise<void>) => {
    const from = Date.now();
    const firstToken = rig.oauth.stats.tokenRequestLog.length;
    log(`${new Date(from).toISOString()} ${fault}`);
    await body();
    // Recovery counts in the window: the load runs on, steady, before the next fault.
    await sleep(options.quietMs);
    windows.push({ fault, from, to: Date.now(), tokenLog: [firstToken, rig.oauth.stats.tokenRequestLog.length] });
  };
  try {
    await mark('none (steady load)', async () => undefined);
    for (const fault of options.faults) await mark(fault.name, () => fault.run(rig.stack));
  } finally {
    await load.stop();
  }
  log('load stopped; waiting for queued work to settle');
  await settle(rig, load.ops);
  log('checking the synced records');
  const records = await checkRecords(rig);
  const runs = await syncRuns(rig);
  // A request belongs to the window it was answered in: one sent just before a fault and cut
  // short by it counts against that fault.
  const routerKills = windows.filter((window) => window.fault.startsWith('webhook-router') && window.fault.includes('SIGKILL')).map((window) => window.from);
  const vaultKills = windows.filter((window) => window.fault.startsWith('credential-vault') && window.fault.includes('SIGKILL')).map((window) => window.from);
  const within = (window: Window, at: number) => at >= window.from && at < window.to;
  const syncFinishes = [...new Set(load.ops.filter((op) => op.kind === 'sync-status' && op.ok && op.key).map((op) => op.key!))].map((at) => Date.parse(at));
  return {
    windows: windows.map((window) =>
      report(
        rig,
        window,
        load.ops.filter((op) => within(window, op.end)),
        runs.filter((run) => within(window, run.end)),
        syncFinishes,
        routerKills,
        vaultKills,
      ),
    ),
    records,
    syncStatuses: load.syncStatuses,
  };
}

interface SyncRun {
  end: number;
  ok: boolean;
  code?: string;
}

/** The `items` sync's runs of `conn-1` in the operations log: when each finished, and how. */
async function syncRuns(rig: ChaosRig): Promise<SyncRun[]> {
  const runs: SyncRun[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ type: 'sync_run', connection_id: SYNC.connection_id, limit: '1000', ...(cursor ? { cursor } : {}) });
    const response = await rig.balancer.fetch(`/operations?${query}`, { headers: { authorization: `Bearer ${rig.stack.bootstrapKey}` }, signal: AbortSignal.timeout(DEADLINE_MS) });
    const page = (await response.json()) as { operations: Array<{ status: string; started_at: string; duration_ms: number; error?: { code: string } }>; next_cursor: string | null };
    if (response.status !== 200) throw new Error(`GET /operations: ${response.status} ${JSON.stringify(page)}`);
    for (const operation of page.operations) {
      runs.push({ end: Date.parse(operation.started_at) + operation.duration_ms, ok: operation.status === 'success', ...(operation.error ? { code: operation.error.code } : {}) });
    }
    cursor = page.next_cursor;
  } while (cursor);
  return runs;
}

/** `GET /records` page size for the check: many pages, so a gap or a repeat between two shows. */
const RECORDS_PAGE_SIZE = 25;

/**
 * Stops the sync's schedule, waits for it to be idle, triggers one more run and waits for it to
 * finish (bounded), then pages the records to the end and compares them with what the upstream
 * serves.
 */
async function checkRecords(rig: ChaosRig): Promise<RecordsReport> {
  const call = async (path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) => {
    const response = await rig.balancer.fetch(path, {
      method: init.method ?? 'GET',
      signal: AbortSignal.timeout(DEADLINE_MS),
      headers: { authorization: `Bearer ${rig.stack.bootstrapKey}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    const text = await response.text();
    return { status: response.status, json: (text ? JSON.parse(text) : undefined) as any };
  };
  const status = async (): Promise<SyncStatusEntry | undefined> => {
    const query = new URLSearchParams({ provider_config_key: SYNC.provider_config_key, syncs: SYNC.sync, connection_id: SYNC.connection_id });
    const answer = await call(`/sync/status?${query}`).catch(() => undefined);
    return answer?.status === 200 ? (answer.json.syncs as SyncStatusEntry[]).find((entry) => entry.variant === 'base') : undefined;
  };
  const waitFor = async (done: (entry: SyncStatusEntry) => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    let last: SyncStatusEntry | undefined;
    while (Date.now() < deadline) {
      last = (await status()) ?? last;
      if (last && done(last)) return { entry: last, done: true };
      await sleep(500);
    }
    return { entry: last, done: false };
  };
  const statusText = (entry: SyncStatusEntry | undefined) => (entry ? `${entry.status}${entry.latestError ? ` ${entry.latestError.code}` : ''}` : 'no status');

  // No scheduled run from here on: with runs every few seconds, a loaded machine runs them back
  // to back (the next claimed as soon as one ends), and the status would hardly ever be seen idle.
  for (let attempt = 0; attempt < 5; attempt++) {
    const answer = await call('/sync/update-connection-frequency', { method: 'PUT', body: { provider_config_key: SYNC.provider_config_key, connection_id: SYNC.connection_id, sync_name: SYNC.sync, frequency: '1h' } }).catch(() => undefined);
    if (answer?.status === 200) break;
    await sleep(1000);
  }
  // The load's last run may still be in flight; a trigger then queues nothing. One lost to a fault
  // before its job was stored is taken back by the next claim once SYNC_RUN_UNSTARTED_MS (120 s)
  // has passed since it last reported (a trigger every 15 s makes that claim); one whose job was
  // stored is delivered again by JetStream to a runner still up.
  let finalRun: string;
  const idleDeadline = Date.now() + 200_000;
  let idle: Awaited<ReturnType<typeof waitFor>> = { entry: undefined, done: false };
  while (!idle.done && Date.now() < idleDeadline) {
    idle = await waitFor((entry) => entry.status !== 'RUNNING', Math.min(15_000, idleDeadline - Date.now()));
    if (!idle.done) await call('/sync/trigger', { method: 'POST', body: { provider_config_key: SYNC.provider_config_key, syncs: [SYNC.sync], connection_id: SYNC.connection_id } }).catch(() => undefined);
  }
  if (!idle.done) {
    finalRun = `still ${statusText(idle.entry)} 200 s after the load`;
  } else {
    const before = idle.entry!.finishedAt;
    let triggered = false;
    for (let attempt = 0; attempt < 5 && !triggered; attempt++) {
      const answer = await call('/sync/trigger', { method: 'POST', body: { provider_config_key: SYNC.provider_config_key, syncs: [SYNC.sync], connection_id: SYNC.connection_id } }).catch(() => undefined);
      triggered = answer?.status === 200;
      if (!triggered) await sleep(1000);
    }
    // A run that finished after the idle one: this trigger's, or a scheduled one started meanwhile.
    const finished = await waitFor((entry) => entry.status !== 'RUNNING' && entry.finishedAt !== null && entry.finishedAt !== before, 120_000);
    finalRun = !triggered ? 'the trigger failed' : finished.done ? statusText(finished.entry) : `none finished within 120 s (${statusText(finished.entry)})`;
  }

  const served = new Set<string>();
  let upstreamCursor: string | null = null;
  do {
    const response = await fetch(`${rig.upstream.url}/paginate/cursor?limit=100${upstreamCursor ? `&cursor=${upstreamCursor}` : ''}`);
    const page = (await response.json()) as { items: Array<{ id: string }>; next_cursor: string | null };
    for (const item of page.items) served.add(item.id);
    upstreamCursor = page.next_cursor;
  } while (upstreamCursor);

  const sightings = new Map<string, number>();
  let deleted = 0;
  let pages = 0;
  let cursor: string | null = null;
  const maxPages = Math.ceil((2 * served.size) / RECORDS_PAGE_SIZE) + 10;
  do {
    const query = new URLSearchParams({ model: SYNC.model, limit: String(RECORDS_PAGE_SIZE), ...(cursor ? { cursor } : {}) });
    let answer: { status: number; json: any } | undefined;
    // The same cursor read again is the same page: a request that failed may be sent again.
    for (let attempt = 0; attempt < 3 && answer?.status !== 200; attempt++) {
      if (attempt > 0) await sleep(1000);
      answer = await call(`/records?${query}`, { headers: { 'connection-id': SYNC.connection_id, 'provider-config-key': SYNC.provider_config_key } }).catch(() => undefined);
    }
    if (answer?.status !== 200) throw new Error(`GET /records (page ${pages + 1}): ${answer?.status ?? 'no answer'} ${JSON.stringify(answer?.json)}`);
    pages++;
    for (const record of answer.json.records as Array<{ id: string; _metadata: { deleted_at: string | null } }>) {
      if (record._metadata.deleted_at !== null) deleted++;
      else sightings.set(record.id, (sightings.get(record.id) ?? 0) + 1);
    }
    cursor = answer.json.next_cursor as string | null;
  } while (cursor && pages < maxPages);

  const ids = [...sightings.keys()];
  return {
    model: SYNC.model,
    served: served.size,
    stored: ids.length,
    missing: [...served].filter((id) => !sightings.has(id)).length,
    repeated: [...sightings.values()].reduce((sum, count) => sum + count - 1, 0),
    unexpected: ids.filter((id) => !served.has(id)).length,
    deleted,
    pages,
    pageSize: RECORDS_PAGE_SIZE,
    pagingEnded: cursor === null,
    finalRun,
  };
}

/** Waits (bounded) until every accepted webhook was forwarded and every accepted action completed. */
async function settle(rig: ChaosRig, ops: Op[]): Promise<void> {
  const markers = new Set(ops.filter((op) => op.kind === 'webhook' && op.ok).map((op) => op.key!));
  const actions = ops.filter((op) => op.kind === 'action' && op.ok && op.key).map((op) => op.key!);
  const deadline = Date.now() + 120_000;
  const forwarded = () => new Set(rig.receiver.received.filter((item) => item.json.type === 'forward').map((item) => item.json.payload?.marker as string));
  while (Date.now() < deadline) {
    const seen = forwarded();
    const delivered = new Set(rig.receiver.received.filter((item) => item.json.type === 'async_action').map((item) => item.json.id as string));
    if ([...markers].every((marker) => seen.has(marker)) && actions.every((id) => delivered.has(id))) break;
    await sleep(500);
  }
  // Room for a late duplicate to show up.
  await sleep(2000);
}

/**
 * How long before its SIGKILL a webhook-router replica may have sent a delivery it never
 * recorded: an attempt holds its message for at most the router's ack wait (its
 * WEBHOOK_TIMEOUT_MS, 10 s, plus 5 s for the record), and its attempt record is written after
 * the receiver's answer, through a group commit that FerretDB may keep waiting for seconds
 * under this load. JetStream hands such a message over again, and it is sent again under the
 * same webhook-id: at-least-once, which Standard Webhooks receivers deduplicate.
 */
const IN_FLIGHT_AT_KILL_MS = 15_000;

/**
 * How long before its SIGKILL a vault replica may have had the provider's answer to a refresh
 * without having kept it. The answer is the only copy of a rotated refresh token; the vault
 * keeps it (one write to `refresh_answers`) before anything else, and the next holder of the
 * lock stores a kept answer (`refresher.int.test.ts`). A replica killed while its token request
 * was in flight, or in the few milliseconds before the keep, loses what nothing had stored yet:
 * the next refresh presents the spent token and the provider refuses it. The CI schedule kills
 * the vault about two token lifetimes into the run, within 2 s of a refresh in every run seen, so
 * this is allowed for, and counted apart, only when the first presentation arrived before the
 * kill and was answered less than this long before it. (The keep took 3 to 40 ms under this
 * load, measured; a kill after it loses nothing, as the next holder stores the kept answer.)
 */
const LOST_AT_KILL_MS = 250;

function report(rig: ChaosRig, window: Window, ops: Op[], runs: SyncRun[], syncFinishes: number[], routerKills: number[], vaultKills: number[]): WindowReport {
  const proxy = ops.filter((op) => op.kind === 'proxy-key' || op.kind === 'proxy-oauth');
  const proxyFailed = proxy.filter((op) => !op.ok);
  const lastFailure = Math.max(window.from, ...proxyFailed.map((op) => op.end));
  const received = rig.receiver.received;

  const acked = ops.filter((op) => op.kind === 'webhook' && op.ok);
  const forwardsOf = (marker: string) => received.filter((item) => item.json.type === 'forward' && item.json.payload?.marker === marker);
  const webhooksLost = acked.filter((op) => forwardsOf(op.key!).length === 0).length;
  // Forwarded twice as two webhooks (two webhook-ids); the same webhook-id twice counts under deliveries.
  const webhooksDuplicated = acked.filter((op) => new Set(forwardsOf(op.key!).map((item) => String(item.headers['webhook-id']))).size > 1).length;

  const accepted = ops.filter((op) => op.kind === 'action' && op.ok && op.key);
  const deliveriesOf = (id: string) => received.filter((item) => item.json.type === 'async_action' && item.json.id === id);
  const incomplete = accepted.filter((op) => deliveriesOf(op.key!).length === 0).map((op) => op.key!);
  const failed = accepted.filter((op) => deliveriesOf(op.key!).length > 0 && deliveriesOf(op.key!).every((item) => item.json.success !== true));
  const failureCodes = failed.map((op) => String(deliveriesOf(op.key!)[0]?.json.error?.code ?? 'none'));
  // Customer webhook deliveries: duplicates per webhook-id at the receiver, over this window's forwards and completions.
  const windowIds = new Set<string>();
  let deliveriesDuplicated = 0;
  let deliveriesResentAfterKill = 0;
  const firstSent = new Map<string, number>();
  for (const item of received) {
    const id = String(item.headers['webhook-id']);
    const at = Number(item.headers['webhook-timestamp']) * 1000;
    if (!firstSent.has(id) || at < firstSent.get(id)!) firstSent.set(id, at);
  }
  for (const item of [...acked.flatMap((op) => forwardsOf(op.key!)), ...accepted.flatMap((op) => deliveriesOf(op.key!))]) {
    const id = String(item.headers['webhook-id']);
    if (windowIds.has(id)) {
      // Sent by a replica killed before it could record the attempt: the at-least-once case
      // Standard Webhooks receivers deduplicate by webhook-id.
      const first = firstSent.get(id)!;
      if (routerKills.some((kill) => first >= kill - IN_FLIGHT_AT_KILL_MS && first <= kill + 1000)) deliveriesResentAfterKill++;
      else deliveriesDuplicated++;
    }
    windowIds.add(id);
  }
  const actionsDuplicated = accepted.filter((op) => new Set(deliveriesOf(op.key!).map((item) => String(item.headers['webhook-id']))).size > 1).length;

  const refreshes = rig.oauth.stats.tokenRequestLog.slice(...window.tokenLog).filter((request) => request.grantType === 'refresh_token');
  const lostToKill = (request: TokenRequestRecord) => {
    const first = rig.oauth.stats.tokenRequestLog.find((earlier) => earlier.grantType === 'refresh_token' && earlier.body['refresh_token'] === request.body['refresh_token']);
    if (!first || first === request || first.status !== 200) return false;
    return vaultKills.some((kill) => first.at <= kill && (first.answeredAt ?? kill) >= kill - LOST_AT_KILL_MS);
  };
  const presented = new Set(refreshes.map((request) => request.body['refresh_token']));
  return {
    fault: window.fault,
    proxyOk: proxy.length - proxyFailed.length,
    proxyFailed: proxyFailed.length,
    errorRate: proxy.length === 0 ? 0 : proxyFailed.length / proxy.length,
    recoveryMs: proxyFailed.length === 0 ? 0 : lastFailure - window.from,
    webhooksAcked: acked.length,
    webhooksLost,
    webhooksDuplicated,
    actionsAccepted: accepted.length,
    actionsIncomplete: incomplete.length,
    incompleteActionIds: incomplete,
    actionsFailed: failed.length,
    actionFailureCodes: failureCodes,
    actionsDuplicated,
    deliveriesDuplicated,
    deliveriesResentAfterKill,
    tokenRequestsPerExpiry: presented.size === 0 ? 0 : refreshes.length / presented.size,
    refreshFailures: refreshes.filter((request) => request.status !== 200 && !lostToKill(request)).length,
    refreshesLostToKill: refreshes.filter((request) => request.status !== 200 && lostToKill(request)).length,
    connectFailed: ops.filter((op) => op.kind === 'connect-session' && !op.ok).length,
    syncRunsOk: runs.filter((run) => run.ok).length,
    syncRunsFailed: runs.filter((run) => !run.ok).length,
    syncTriggersFailed: ops.filter((op) => op.kind === 'sync-trigger' && !op.ok).length,
    syncFinishesSeen: syncFinishes.filter((at) => at >= window.from && at < window.to).length,
    hung: ops.filter((op) => op.status === 'hung').length,
    failures: [
      ...ops.filter((op) => !op.ok).map((op) => `${op.kind} ${op.status} ${op.code ?? ''}`.trim()),
      ...runs.filter((run) => !run.ok).map((run) => `sync-run ${run.code ?? 'failure'}`),
    ].reduce<Record<string, number>>((counts, key) => {
      counts[key] = (counts[key] ?? 0) + 1;
      return counts;
    }, {}),
  };
}

function safeCode(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** A moment as the UTC time of day to the millisecond (`18:40:25.101`), to set beside the faults' start times. */
const clockTime = (ms: number) => new Date(ms).toISOString().slice(11, 23);

/** Every refresh the provider saw, in order: which token it presented (#n), whether it was seen before, the answer. */
export function refreshSummary(rig: ChaosRig): string {
  const numbers = new Map<string, number>();
  return rig.oauth.stats.tokenRequestLog
    .filter((request) => request.grantType === 'refresh_token')
    .map((request) => {
      const token = request.body['refresh_token'] ?? '';
      const again = numbers.has(token);
      if (!again) numbers.set(token, numbers.size + 1);
      return `#${numbers.get(token)}${again ? ' (again)' : ''} → ${request.status ?? 'pending'} at ${clockTime(request.at)}`;
    })
    .join(', ');
}

/**
 * The sync's status through the load, one change at a time (`18:40:25.101 SUCCESS, finished
 * 18:40:24.870`): where no run finished for a while, whether one was running all along (lost or
 * slow) or none was started.
 */
export function syncTimeline(changes: readonly SyncStatusChange[]): string {
  return changes
    .map(({ at, status, finishedAt, error }) => `${clockTime(at)} ${status}${error ? ` ${error}` : ''}${finishedAt ? `, finished ${clockTime(Date.parse(finishedAt))}` : ''}`)
    .join('; ');
}

/** Webhook-ids the receiver got more than once, with the time of each attempt (its webhook-timestamp). */
export function duplicateSummary(rig: ChaosRig): string {
  const byId = new Map<string, string[]>();
  for (const item of rig.receiver.received) {
    const id = String(item.headers['webhook-id']);
    byId.set(id, [...(byId.get(id) ?? []), `${item.json.type} at ${String(item.headers['webhook-timestamp'])}`]);
  }
  return [...byId.entries()]
    .filter(([, seen]) => seen.length > 1)
    .map(([id, seen]) => `${id}: ${seen.join(', ')}`)
    .join('\n');
}

/** Where each incomplete action stands: its status as GET /action/{id} answers, and the completion webhooks it got. */
export async function incompleteSummary(rig: ChaosRig, rows: WindowReport[]): Promise<string> {
  const lines: string[] = [];
  for (const id of rows.flatMap((row) => row.incompleteActionIds)) {
    const status = await http(`${rig.stack.url}/action/${id}`, { token: rig.stack.bootstrapKey }).catch((error: unknown) => ({ status: String(error), json: null }));
    const webhooks = rig.receiver.received.filter((item) => item.json.type === 'async_action' && item.json.id === id).map((item) => JSON.stringify(item.json));
    lines.push(`${id}: GET ${status.status} ${JSON.stringify(status.json)}; webhooks: ${webhooks.join(' ') || 'none'}`);
  }
  return lines.join('\n');
}

/** What failed in each window, by kind, status and code. */
export function formatFailures(rows: WindowReport[]): string {
  return rows
    .filter((row) => Object.keys(row.failures).length > 0)
    .map((row) => `${row.fault}: ${Object.entries(row.failures).map(([key, count]) => `${key} ×${count}`).join(', ')}`)
    .join('\n');
}

/** The records line under the table. */
export function formatRecords(records: RecordsReport): string {
  return (
    `records (${records.model}, after the load): ${records.served} served, ${records.stored} stored, ${records.missing} missing, ${records.repeated} repeated, ` +
    `${records.unexpected} unexpected, ${records.deleted} deleted; ${records.pages} pages of ${records.pageSize}${records.pagingEnded ? '' : ' (paging did not end)'}; last run ${records.finalRun}`
  );
}

/** The table `make chaos` prints: a row per fault window, then the records line. */
export function formatTable({ windows: rows, records }: Pick<ChaosReport, 'windows' | 'records'>): string {
  const head = ['fault', 'proxy ok', 'proxy failed', 'error rate', 'recovery', 'webhooks acked/lost/dup', 'deliveries dup (resent after router kill)', 'actions accepted/incomplete/dup (failed, coded)', 'token req/expiry', 'refresh failed', 'connect failed', 'sync runs seen, logged ok/failed (triggers failed)', 'hung'];
  const lines = rows.map((row) => [
    row.fault,
    String(row.proxyOk),
    String(row.proxyFailed),
    `${(row.errorRate * 100).toFixed(2)}%`,
    `${(row.recoveryMs / 1000).toFixed(1)} s`,
    `${row.webhooksAcked}/${row.webhooksLost}/${row.webhooksDuplicated}`,
    `${row.deliveriesDuplicated} (${row.deliveriesResentAfterKill})`,
    `${row.actionsAccepted}/${row.actionsIncomplete}/${row.actionsDuplicated} (${row.actionsFailed})`,
    row.tokenRequestsPerExpiry === 0 ? '-' : row.tokenRequestsPerExpiry.toFixed(2),
    row.refreshesLostToKill === 0 ? String(row.refreshFailures) : `${row.refreshFailures} (${row.refreshesLostToKill} lost to the vault kill)`,
    String(row.connectFailed),
    `${row.syncFinishesSeen}, ${row.syncRunsOk}/${row.syncRunsFailed} (${row.syncTriggersFailed})`,
    String(row.hung),
  ]);
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...lines.map((cells) => `| ${cells.join(' | ')} |`), '', formatRecords(records)].join('\n');
}

/** SIGKILL NATS node `index`, keep it away `downMs`, start it again. */
export function killNatsNode(index: number, downMs: number): Fault {
  return {
    name: `NATS node ${index + 1} SIGKILL, restarted after ${downMs / 1000} s`,
    run: async (stack) => {
      const node = stack.natsCluster!.nodes[index]!;
      await node.kill();
      await sleep(downMs);
      await node.restart();
    },
  };
}

/** SIGKILL replica `index` of `service`, start it again after `downMs`. */
export function killReplica(service: ServiceName, index: number, downMs: number): Fault {
  return {
    name: `${service} replica ${index + 1} SIGKILL`,
    run: async (stack) => {
      await stack.kill(service, index);
      await sleep(downMs);
      await stack.start(service, index);
    },
  };
}

export function restartDatabase(downMs: number): Fault {
  return {
    name: `FerretDB restart (${downMs / 1000} s away)`,
    run: async (stack) => {
      if (!stack.mongo.restart) throw new Error('this MongoDB-wire server cannot be restarted by the test (MONGODB_URI or a container)');
      await stack.mongo.restart(downMs);
    },
  };
}

/** SIGTERM then start, one replica at a time, every service, as a Kubernetes rolling update. */
export function rollingRestart(services: readonly ServiceName[], replicas: number): Fault {
  return {
    name: 'rolling restart (SIGTERM, one replica at a time)',
    run: async (stack) => {
      for (const service of services) {
        for (let index = 0; index < replicas; index++) {
          const code = await stack.stop(service, index);
          if (code !== 0) throw new Error(`${service} replica ${index + 1} exited ${code} on SIGTERM`);
          await stack.start(service, index);
        }
      }
    },
  };
}
