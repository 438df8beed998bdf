import { functionsContracts, MAX_ACTION_OUTPUT_BYTES, type FunctionType } from '@latchkey/contracts';
import type { Bus } from '@latchkey/bus';
import { toAppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { inSpan } from '@latchkey/tracing';
import { runInSandbox, type LogLevel, type SandboxLimits } from '../sandbox/run-in-sandbox.js';
import { observeFunctionRun } from '../run-metrics.js';
import type { CachedFunction, FunctionCache } from './function-cache.js';
import { createHost, type CtxGrants, type HostDeps, type RecordedWrite, type RunTarget, type SyncWrites } from './host.js';
import type { Limited } from './limiter.js';

export interface RunnerDeps extends HostDeps {
  bus: Bus;
  logger: Logger;
  cache: FunctionCache;
  limits: Omit<SandboxLimits, 'maxOutputBytes'>;
  /** A sync run's own bounds (it runs as long as its data needs); the memory limit is `limits`'. */
  syncLimits: Pick<SandboxLimits, 'timeoutMs' | 'cpuTimeMs'>;
  /** Loaded isolates kept per deployed function between runs; 0 loads a fresh one for every run. */
  warmIsolates: number;
  /** Bounds the runs of this replica, each environment taking its turn (`createLimiter`). */
  limited: Limited;
}

export interface LogEntry {
  level: LogLevel;
  message: string;
  at: string;
  fields?: Record<string, unknown>;
}

export interface RunOutcome {
  /** The output as JSON text; undefined when the function returned nothing. */
  output: string | undefined;
  definition: { kind: string; name: string };
  logs: LogEntry[];
  writes: RecordedWrite[];
}

const MAX_LOG_ENTRIES = 500;

export function createRunner(deps: RunnerDeps) {
  /** The current deployment's function, from this replica's cache or the sync-scheduler. */
  async function loadFunction(environmentId: string, providerConfigKey: string, type: FunctionType, name: string): Promise<CachedFunction> {
    const cached = deps.cache.get(environmentId, providerConfigKey, type, name);
    if (cached) return cached;
    const generation = deps.cache.generation(environmentId, providerConfigKey);
    const fn = await deps.bus.request(functionsContracts.get, { environment_id: environmentId, provider_config_key: providerConfigKey, type, name });
    deps.cache.set(environmentId, providerConfigKey, type, name, fn, generation);
    return fn;
  }

  /** Runs a function for a connection in the sandbox, within this replica's concurrency. */
  async function run(options: {
    target: Omit<RunTarget, 'function_name'>;
    /** A deployed function, or freshly compiled code (a dry run of source) whose kind is not known yet. */
  fn: { bundle: string; description?: CachedFunction['description']; version?: number };
    entry?: 'exec' | 'onWebhook';
    input?: unknown;
    dryRun?: boolean;
    /** Where log lines and recorded writes go (kept by the caller even when the run fails). */
    logs?: LogEntry[];
    writes?: RecordedWrite[];
    /** A sync run: record writes go to the records store. */
    sync?: SyncWrites;
    /** On whose behalf `ctx` acts: every caller says (the environment, or a dry run's API key). */
    grants: CtxGrants;
    /** Aborted when this replica stops and hands the run back: the run stops where it is. */
    signal?: AbortSignal;
    /** A run whose caller waits for it: the longest wait for a free slot, past which it never starts (503). */
    maxWaitMs?: number;
  }): Promise<RunOutcome> {
    const { description } = options.fn;
    const name = description?.name ?? 'dryrun';
    const logs: LogEntry[] = options.logs ?? [];
    const writes: RecordedWrite[] = options.writes ?? [];
    const dryRun = options.dryRun ?? false;
    const target = { ...options.target, function_name: name };
    const started = performance.now();
    const result = await deps.limited(() =>
      inSpan('sandbox run', { attributes: { 'latchkey.function': name, 'latchkey.connection_id': target.connection_id } }, () => runInSandbox({
        bundle: options.fn.bundle,
        entry: options.entry ?? 'exec',
        ...(description ? { kind: description.type } : {}),
        input: options.input,
        // Warm isolates for deployed runs only: a dry run acts with its key's scopes, and must
        // not find what a run with the environment's grants left in the module (a token, say).
        ...(options.fn.version !== undefined && description && deps.warmIsolates > 0 && !dryRun
          ? {
              reuse: {
                key: [target.environment_id, target.provider_config_key, description.type, description.name, options.fn.version].join('\u0000'),
                perKey: deps.warmIsolates,
              },
            }
          : {}),
        info: { connectionId: target.connection_id, providerConfigKey: target.provider_config_key, dryRun, ...(options.sync ? { variant: options.sync.variant } : {}) },
        host: createHost(deps, target, { dryRun, writes, grants: options.grants, ...(options.sync ? { sync: options.sync } : {}) }),
        onLog: (level, message, fields) => {
          if (logs.length < MAX_LOG_ENTRIES) logs.push({ level, message, at: new Date().toISOString(), ...(fields ? { fields } : {}) });
          // Customers' log lines stay out of ours unless debugging: they may print anything.
          deps.logger.debug('function log', { function: `${target.provider_config_key}/${name}`, level, message });
        },
        limits: { ...deps.limits, ...(options.sync?.scheduled ? deps.syncLimits : {}), maxOutputBytes: MAX_ACTION_OUTPUT_BYTES },
        ...(options.signal ? { signal: options.signal } : {}),
      }).then(
        (done) => {
          observeFunctionRun(description?.type ?? 'dryrun', undefined, (performance.now() - started) / 1000);
          return done;
        },
        (error: unknown) => {
          const outcome = options.signal?.aborted ? 'handed_back' : toAppError(error).code;
          observeFunctionRun(description?.type ?? 'dryrun', outcome, (performance.now() - started) / 1000);
          throw error;
        },
      )),
      {
        owner: target.environment_id,
        // A run waiting for a free slot when its replica hands it back leaves the line at once.
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.maxWaitMs !== undefined ? { maxWaitMs: options.maxWaitMs } : {}),
      },
    );
    return { output: result.output, definition: result.definition, logs, writes };
  }

  return { loadFunction, run };
}

export type Runner = ReturnType<typeof createRunner>;
