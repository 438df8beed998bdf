import { parseOrThrow, type Bus } from '@latchkey/bus';
import {
  gatewayContracts,
  metadataSchema,
  recordsContracts,
  syncCheckpoint,
  MAX_CHECKPOINT_BYTES,
  RETRY_ON_STATUSES,
  type SyncCheckpoint,
  type ModelCounts,
  type ModelField,
  type RecordFailure,
  vaultContracts,
  type ProxyRequestMeta,
  type Scope,
} from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { callProxy } from '@latchkey/proxy-hop';
import { z } from 'zod';
import type { HostMethods } from '../sandbox/run-in-sandbox.js';
import { createAnswerBudget } from './answer-budget.js';

export interface HostDeps {
  bus: Bus;
  proxyTimeoutMs: number;
  publicUrl: string;
}

export interface RunTarget {
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  /** The function's name: calls are audited as `function:<integration>/<name>`. */
  function_name: string;
}

/**
 * On whose behalf a run's `ctx` acts. Deployed functions (actions, syncs, lifecycle and webhook
 * functions) run for the environment: their code was deployed with `environment:deploy`, and
 * their `ctx` may do everything `CTX_SCOPES` lists. A dry run acts for the API key that started
 * it: its scopes come with the job from the gateway (never from the function), and each `ctx`
 * call needs the scope the matching API route needs.
 */
export type CtxGrants =
  | { kind: 'environment' }
  /** `refused`: the scopes a call of this run lacked, noted here, out of the function's reach. */
  | { kind: 'api_key'; scopes: ReadonlySet<Scope>; refused: Scope[] };
export const ENVIRONMENT_GRANTS: CtxGrants = { kind: 'environment' };

/** What a run asked to write; a dry run reports these instead of applying them. */
export interface RecordedWrite {
  operation: string;
  model?: string;
  data: unknown;
}

/**
 * What a run keeps of the writes it reports (a dry run's, an action's): 1,000 of them and 4 MiB
 * of their JSON at most. Past either, writes are checked and dropped: a function sending without
 * end must not make the host hold it all.
 */
const MAX_KEPT_WRITES = 1000;
const MAX_KEPT_WRITES_CHARS = 4 * 1024 * 1024;

/**
 * Where a sync run's records go: `records.write` in the run's variant, checked against the
 * model's fields from the deployment, with what changed counted per model.
 */
export interface SyncWrites {
  variant: string;
  models: ReadonlyMap<string, ModelField[]>;
  counts: ModelCounts;
  /**
   * A scheduled run's (`exec`'s; an `onWebhook` run has none): its writes name `runId` and this
   * `attempt` of it (refused once the run is over, or once a later attempt began), `checkpoint`
   * is the one saved last (null: none), `report` sends the counts so far with a checkpoint to
   * save (an object) or clear (null), or only the counts. `signal` aborts when this attempt of
   * the run ends (handed back to another replica, failed or done): nothing more of it is
   * written, a batch it did not await included.
   */
  scheduled?: { runId: string; attempt?: number; checkpoint: SyncCheckpoint | null; report: (checkpoint?: SyncCheckpoint | null) => Promise<void>; signal?: AbortSignal };
}

/**
 * How long a write of `count` records may take. A batch of up to 10,000 records is written in
 * one request: on a slow database (FerretDB's SQLite backend upserts about a few hundred a
 * second) that takes far longer than a query, so the largest batch gets two minutes. A small one
 * gets seconds: a request lost with a NATS node has no answer to wait for, and the sync run
 * holds its schedule (its job kept alive by the consumer's heartbeat) until the deadline.
 */
export function recordWriteTimeoutMs(count: number): number {
  return Math.min(120_000, 10_000 + count * 11);
}

/** A provider answer larger than this fails the call instead of filling the replica's memory. */
const MAX_PROXY_RESPONSE_BYTES = 25 * 1024 * 1024;
/** The answers `ctx.proxy` holds in this replica at once, all runs together. */
const answers = createAnswerBudget();
/** Never sent upstream from a function (the proxy injects credentials itself). */
const proxyConfig = z.object({
  endpoint: z.string().min(1).max(8192),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']).default('GET'),
  headers: z.record(z.string(), z.string()).optional(),
  params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
  data: z.unknown().optional(),
  retries: z.number().int().min(0).max(10).default(0),
  retryOn: z.array(z.number().int().min(RETRY_ON_STATUSES.min).max(RETRY_ON_STATUSES.max)).default([]),
  baseUrlOverride: z.string().regex(/^https?:\/\/\S+$/i, 'an http(s) URL').optional(),
  decompress: z.boolean().optional(),
  responseType: z.enum(['json', 'text']).default('json'),
});

const records = z.array(z.record(z.string(), z.unknown())).max(10_000);
const modelName = z.string().min(1).max(128);

/** Room left in a write's message for its JSON's punctuation and the bus's envelope. */
const REQUEST_HEADROOM_BYTES = 4 * 1024;

/**
 * A batch cut, in order, into parts whose records' JSON fits `budget` bytes, each with the index
 * of its first record; a record larger than `budget` alone goes in no part (`tooLarge`). A batch
 * is as large as its function made it (10,000 records), a message is not (NATS's max_payload).
 */
export function messageSizedParts(records: Array<Record<string, unknown>>, budget: number): { parts: Array<{ start: number; records: Array<Record<string, unknown>> }>; tooLarge: number[] } {
  const parts: Array<{ start: number; records: Array<Record<string, unknown>> }> = [];
  const tooLarge: number[] = [];
  let current: { start: number; records: Array<Record<string, unknown>> } | undefined;
  let bytes = 0;
  records.forEach((record, index) => {
    // Its comma (or the closing bracket) counts too; a part's opening bracket, once.
    const size = Buffer.byteLength(JSON.stringify(record)) + 1;
    if (size + 1 > budget) {
      // The next part starts after it: a part's records stay consecutive in the batch.
      tooLarge.push(index);
      current = undefined;
      return;
    }
    if (current === undefined || bytes + size > budget) {
      current = { start: index, records: [] };
      parts.push(current);
      bytes = 1;
    }
    current.records.push(record);
    bytes += size;
  });
  return { parts, tooLarge };
}

/**
 * The host side of a run's context: every way out of the sandbox, bound to one connection.
 * Calls go where the gateway's would: the proxy service over `proxy.request`, the vault for
 * connections and metadata, the gateway for environment variables. `dryRun` turns writes into
 * entries of `writes`.
 */
export function createHost(
  deps: HostDeps,
  target: RunTarget,
  options: { dryRun: boolean; writes: RecordedWrite[]; sync?: SyncWrites; grants: CtxGrants },
): HostMethods {
  // CTX_SCOPES lets writes through for a key because a key's run only lists them.
  if (options.grants.kind === 'api_key' && !options.dryRun) throw new AppError('internal_error', 'A run acting for an API key must be a dry run');
  return guardHost(hostMethods(deps, target, options), options.grants);
}

function hostMethods(deps: HostDeps, target: RunTarget, options: { dryRun: boolean; writes: RecordedWrite[]; sync?: SyncWrites; grants: CtxGrants }) {
  const readerKey = `function:${target.provider_config_key}/${target.function_name}`;
  const connectionRead = (includeCredentials: boolean) =>
    deps.bus.request(vaultContracts.getConnection, {
      environment_id: target.environment_id,
      reader: { key_id: readerKey },
      connection_id: target.connection_id,
      provider_config_key: target.provider_config_key,
      include_credentials: includeCredentials,
      include_refresh_token: false,
      force_refresh: false,
      refresh_vendor_app_jwt_token: false,
    });
  let provider: Promise<string> | undefined;
  let keptChars = 0;
  const keep = (write: RecordedWrite) => {
    if (options.writes.length >= MAX_KEPT_WRITES || keptChars >= MAX_KEPT_WRITES_CHARS) return;
    const chars = JSON.stringify(write.data).length;
    if (keptChars + chars > MAX_KEPT_WRITES_CHARS) return;
    keptChars += chars;
    options.writes.push(write);
  };

  const writeMetadata = async (mode: 'replace' | 'merge', value: unknown) => {
    const metadata = parseOrThrow(metadataSchema, value, 'metadata');
    if (options.dryRun) {
      keep({ operation: mode === 'replace' ? 'setMetadata' : 'updateMetadata', data: metadata });
      return null;
    }
    await deps.bus.request(vaultContracts.writeMetadata, {
      environment_id: target.environment_id,
      connection_ids: [target.connection_id],
      provider_config_key: target.provider_config_key,
      metadata,
      mode,
    });
    return null;
  };

  const recordWrite = (operation: 'batchSave' | 'batchUpdate' | 'batchDelete') => async (value: unknown, model: unknown) => {
    const checked = parseOrThrow(records, value, operation);
    const name = parseOrThrow(modelName, model, operation);
    const sync = options.sync;
    // A dry run, or an action (which has no models to write to), reports what it would write.
    if (options.dryRun || !sync) {
      keep({ operation, model: name, data: checked });
      return null;
    }
    const fields = sync.models.get(name);
    if (!fields) throw new AppError('invalid_records', `${operation}: "${name}" is not a model of this sync (${[...sync.models.keys()].join(', ')})`);
    if (checked.length === 0) return null;
    const request = {
      environment_id: target.environment_id,
      connection_id: target.connection_id,
      provider_config_key: target.provider_config_key,
      model: name,
      variant: sync.variant,
      mode: operation === 'batchSave' ? ('save' as const) : operation === 'batchUpdate' ? ('update' as const) : ('delete' as const),
      fields: fields.map((field) => ({ name: field.name, type: field.type })),
      ...(sync.scheduled ? { run_id: sync.scheduled.runId, ...(sync.scheduled.attempt === undefined ? {} : { attempt: sync.scheduled.attempt }) } : {}),
    };
    const { parts, tooLarge } = messageSizedParts(checked, deps.bus.inlineLimit - Buffer.byteLength(JSON.stringify(request)) - REQUEST_HEADROOM_BYTES);
    const failed: RecordFailure[] = tooLarge.map((index) => ({
      index,
      ...(typeof checked[index]!['id'] === 'string' ? { id: checked[index]!['id'] as string } : {}),
      errors: [{ code: 'record_too_large', message: `larger than the ${deps.bus.inlineLimit} bytes one write carries` }],
    }));
    // In order, one message each: a later part never overtakes an earlier one's records.
    for (const { start, records: part } of parts) {
      // Handed back meanwhile (its isolate gone, the batch's call still running here): the replica
      // taking the run over resumes from the checkpoint and may already be writing newer records,
      // which this batch's later parts would overwrite with older ones.
      attemptOver(sync);
      const result = await deps.bus.request(recordsContracts.write, { ...request, records: part }, { timeoutMs: recordWriteTimeoutMs(part.length) });
      countWrites(sync.counts, name, result);
      await sync.scheduled?.report();
      failed.push(...result.failed.map((failure) => ({ ...failure, index: failure.index + start })));
    }
    // Fails loudly, after the good records of the batch were written.
    if (failed.length > 0) {
      const first = failed.reduce((earliest, failure) => (failure.index < earliest.index ? failure : earliest));
      const detail = first.errors.map((error) => `${error.path ? `${error.path}: ` : ''}${error.message}`).join('; ');
      throw new AppError('invalid_records', `${operation}: ${failed.length} of ${checked.length} ${name} records are invalid (record ${first.id ?? `#${first.index}`}: ${detail})`);
    }
    return null;
  };

  return {
    proxy: async (value: unknown) => proxyFromFunction(deps, target, readerKey, parseOrThrow(proxyConfig, value, 'ctx.proxy')),
    getConnection: async () => {
      // As GET /connection: credentials only for `connections:read_credentials` (stripped otherwise).
      const connection = await connectionRead(granted(options.grants, 'environment:connections:read_credentials'));
      return {
        id: connection.id,
        connection_id: connection.connection_id,
        provider_config_key: connection.provider_config_key,
        provider: connection.provider,
        metadata: connection.metadata,
        connection_config: connection.connection_config,
        tags: connection.tags,
        ...(connection.credentials ? { credentials: connection.credentials } : {}),
      };
    },
    getIntegration: async () => {
      const [integration, environment] = await Promise.all([
        deps.bus.request(vaultContracts.getIntegration, {
          environment_id: target.environment_id,
          unique_key: target.provider_config_key,
          include_webhook: true,
          include_credentials: false,
        }),
        deps.bus.request(gatewayContracts.getEnvironment, { environment_id: target.environment_id }),
      ]);
      return {
        unique_key: integration.unique_key,
        provider: integration.provider,
        webhook_url: `${deps.publicUrl.replace(/\/+$/, '')}/webhook/${environment.public_id}/${encodeURIComponent(integration.unique_key)}`,
        ...(integration.webhookSecret && granted(options.grants, 'environment:integrations:read_credentials') ? { webhookSecret: integration.webhookSecret } : {}),
      };
    },
    getMetadata: async () => (await connectionRead(false)).metadata,
    setMetadata: (value: unknown) => writeMetadata('replace', value),
    updateMetadata: (value: unknown) => writeMetadata('merge', value),
    getEnvironmentVariables: async () => (await deps.bus.request(gatewayContracts.getEnvironment, { environment_id: target.environment_id })).variables,
    batchSave: recordWrite('batchSave'),
    batchUpdate: recordWrite('batchUpdate'),
    batchDelete: recordWrite('batchDelete'),
    getCheckpoint: async () => options.sync?.scheduled?.checkpoint ?? null,
    saveCheckpoint: async (value: unknown) => {
      const parsed = syncCheckpoint.safeParse(value);
      if (!parsed.success) throw new AppError('invalid_body', `ctx.saveCheckpoint takes a JSON object of at most ${MAX_CHECKPOINT_BYTES} bytes`);
      // Outside a scheduled sync run (an action, a dry run, a webhook run) nothing resumes: a no-op.
      const scheduled = options.dryRun ? undefined : options.sync?.scheduled;
      if (!scheduled) return null;
      attemptOver(options.sync);
      await scheduled.report(parsed.data);
      scheduled.checkpoint = parsed.data;
      return null;
    },
    clearCheckpoint: async () => {
      const scheduled = options.dryRun ? undefined : options.sync?.scheduled;
      if (!scheduled) return null;
      attemptOver(options.sync);
      await scheduled.report(null);
      scheduled.checkpoint = null;
      return null;
    },
    paginateSettings: async () => {
      provider ??= connectionRead(false).then((connection) => connection.provider);
      const entry = await deps.bus.request(vaultContracts.getProvider, { name: await provider });
      return entry.proxy?.paginate ?? null;
    },
  };
}

type CtxMethod = keyof ReturnType<typeof hostMethods>;

/**
 * The scope each `ctx` method needs when a run acts for an API key: the scope of the API route
 * that does the same. Writes need none because only dry runs act for a key, and a dry run
 * records its writes instead of applying them. A method missing here does not compile.
 */
export const CTX_SCOPES: Record<CtxMethod, Scope | null> = {
  proxy: 'environment:proxy',
  getConnection: 'environment:connections:read',
  getIntegration: 'environment:integrations:read',
  getMetadata: 'environment:connections:read',
  setMetadata: null,
  updateMetadata: null,
  getEnvironmentVariables: 'environment:variables:read',
  batchSave: null,
  batchUpdate: null,
  batchDelete: null,
  getCheckpoint: null,
  saveCheckpoint: null,
  clearCheckpoint: null,
  paginateSettings: 'environment:connections:read',
};

function granted(grants: CtxGrants, scope: Scope): boolean {
  return grants.kind === 'environment' || grants.scopes.has(scope);
}

/** Every call out of the sandbox passes here: a method the grants do not cover is `forbidden`. */
export function guardHost(methods: Record<CtxMethod, (...args: any[]) => Promise<unknown>>, grants: CtxGrants): HostMethods {
  const guarded: HostMethods = {};
  for (const name of Object.keys(CTX_SCOPES) as CtxMethod[]) {
    const scope = CTX_SCOPES[name];
    const method = methods[name] as (...args: unknown[]) => Promise<unknown>;
    guarded[name] = async (...args: unknown[]) => {
      if (scope !== null && !granted(grants, scope)) {
        if (grants.kind === 'api_key') grants.refused.push(scope);
        throw new AppError('forbidden', `ctx.${name} needs the scope ${scope}, which the API key of this dry run lacks`);
      }
      return method(...args);
    };
  }
  return guarded;
}

/**
 * A function's endpoint may carry its own query (`/tickets?status=open`) beside `params` (which
 * `ctx.paginate` adds its cursor and limit to): the call's path, and its query made of the
 * endpoint's parameters as written, less those `params` names, then `params`. The proxy takes
 * one query; with the endpoint's dropped, every page after the first lost its filter.
 */
export function endpointAndParams(endpoint: string, params: Record<string, string | number | boolean> | undefined): { path: string; query: string } {
  const at = endpoint.indexOf('?');
  const given = Object.entries(params ?? {});
  const added = new URLSearchParams(given.map(([name, value]): [string, string] => [name, String(value)])).toString();
  if (at < 0) return { path: endpoint, query: added };
  const named = new Set(given.map(([name]) => name));
  // Each pair's name decoded as a form decodes it (`URLSearchParams`), the pair kept as written.
  const kept = endpoint
    .slice(at + 1)
    .split('&')
    .filter((pair) => pair !== '' && !named.has(new URLSearchParams(pair).keys().next().value ?? ''));
  return { path: endpoint.slice(0, at), query: [...kept, ...(added === '' ? [] : [added])].join('&') };
}

/** `ctx.proxy`: the call through the proxy client, as the gateway's `/proxy` route makes it. */
async function proxyFromFunction(deps: HostDeps, target: RunTarget, readerKey: string, config: z.infer<typeof proxyConfig>) {
  // As given, `Connection` included: the proxy service applies the one header policy to every
  // caller's call. Each is the function's own, as the client's `headers` are (it sends them all
  // prefixed): its `Authorization` or `Cookie` goes too, unless the credentials inject that header.
  const headers: Array<[string, string]> = Object.entries(config.headers ?? {});
  const explicit = headers.map((_, position) => position);
  let body: Buffer = Buffer.alloc(0);
  if (config.data !== undefined && config.method !== 'GET' && config.method !== 'HEAD') {
    if (typeof config.data === 'string') body = Buffer.from(config.data);
    else {
      body = Buffer.from(JSON.stringify(config.data));
      if (!headers.some(([name]) => name.toLowerCase() === 'content-type')) headers.push(['Content-Type', 'application/json']);
    }
  }
  const { path, query } = endpointAndParams(config.endpoint, config.params);
  const meta: Omit<ProxyRequestMeta, 'body'> = {
    environment_id: target.environment_id,
    key_id: readerKey,
    connection_id: target.connection_id,
    provider_config_key: target.provider_config_key,
    method: config.method,
    path: path.replace(/^\/+/, ''),
    query,
    headers,
    ...(explicit.length === 0 ? {} : { explicit_headers: explicit }),
    retries: config.retries,
    retry_on: config.retryOn,
    ...(config.baseUrlOverride === undefined ? {} : { base_url_override: config.baseUrlOverride }),
    ...(config.decompress === undefined ? {} : { decompress: config.decompress }),
  };
  const reply = await callProxy(deps.bus, { meta, body, timeoutMs: deps.proxyTimeoutMs });
  return answers.read(reply, MAX_PROXY_RESPONSE_BYTES, (bytes) => proxyAnswer(reply.status, reply.headers, bytes, config.responseType));
}

/**
 * What `ctx.proxy` hands the isolate: the answer's text as it came, with `parse` when the
 * function asked for JSON. The prelude parses it inside the isolate, under the run's memory
 * limit: parsed here, an answer of up to 25 MiB would become many times that in objects in the
 * runner's own heap, outside any run's limit, once for each run calling at once.
 */
export function proxyAnswer(status: number, headers: Iterable<[string, string]>, bytes: Buffer, responseType: 'json' | 'text') {
  const responseHeaders: Record<string, string> = {};
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    responseHeaders[lower] = lower in responseHeaders ? `${responseHeaders[lower]}, ${value}` : value;
  }
  return { status, headers: responseHeaders, data: bytes.toString('utf8'), ...(responseType === 'json' ? { parse: true } : {}) };
}

/** Throws once an attempt of a scheduled sync run has ended (handed back, failed, done): its writes and checkpoints stop there. */
function attemptOver(sync: SyncWrites | undefined): void {
  if (sync?.scheduled?.signal?.aborted) throw new AppError('function_failed', 'This attempt of the sync run is over (handed back, or ended): nothing more of it is written');
}

/** Adds one write's counts (or an earlier attempt's) to a sync run's, by model. */
export function countWrites(into: ModelCounts, model: string, written: { added: number; updated: number; deleted: number }): void {
  const counts = (into[model] ??= { added: 0, updated: 0, deleted: 0 });
  counts.added += written.added;
  counts.updated += written.updated;
  counts.deleted += written.deleted;
}
