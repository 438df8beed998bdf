import { actionContracts, functionsContracts, syncContracts, vaultContracts, webhookContracts, type FunctionType, type ModelCounts, type ModelField, type PayloadOf, type RequestOf } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import type { Bus, JobMessage } from '@latchkey/bus';
import type { Logger } from '@latchkey/logger';
import type { LifecycleRunRepo } from '../db/lifecycle-run-repo.js';
import { SYNC_RUN_SLOT_WAIT_MS, isOurOutage, untilStopped } from '../domain/action-deps.js';
import type { CachedFunction } from '../domain/function-cache.js';
import { ENVIRONMENT_GRANTS, type CtxGrants, type RecordedWrite } from '../domain/host.js';
import type { LogEntry, Runner } from '../domain/run-function.js';
import { subscribes, webhookType } from '../domain/webhook-match.js';
import { requireConnection } from '../domain/require-connection.js';

export interface FunctionDeps {
  bus: Bus;
  logger: Logger;
  runner: Runner;
  /** See `ActionDeps.stopping`. */
  stopping: AbortSignal;
  /** The lifecycle functions that ran for an event delivered again. */
  lifecycleRuns: Pick<LifecycleRunRepo, 'isDone' | 'markDone'>;
}

const COMPILE_TIMEOUT_MS = 30_000;

/** A deployed function by name, whatever its type (actions first). */
async function deployedByName(deps: FunctionDeps, request: { environment_id: string; provider_config_key: string }, name: string): Promise<CachedFunction> {
  for (const type of ['action', 'sync', 'on-event'] as FunctionType[]) {
    try {
      return await deps.runner.loadFunction(request.environment_id, request.provider_config_key, type, name);
    } catch (error) {
      const code = toAppError(error).code;
      if (code !== 'unknown_action' && code !== 'unknown_function') throw error;
    }
  }
  throw new AppError('unknown_function', `No function "${name}" is deployed for integration "${request.provider_config_key}"`);
}

/**
 * A dry run: the source is compiled by the sync-scheduler (or the deployed function is taken),
 * then run against the real connection with writes to Latchkey recorded instead of applied.
 * The function's failure is part of the answer, not an error of the request.
 */
export function dryRunHandler(deps: FunctionDeps) {
  return async (request: RequestOf<typeof actionContracts.dryRun>) => {
    let fn: { bundle: string; description?: CachedFunction['description'] };
    if (request.source !== undefined) {
      const compiled = await deps.bus.request(functionsContracts.compile, { source: request.source }, { timeoutMs: COMPILE_TIMEOUT_MS });
      if (!compiled.success || compiled.bundle === undefined) {
        throw new AppError('function_compilation_failed', 'The source does not compile', {
          errors: compiled.diagnostics
            .filter((item) => item.severity === 'error')
            .map((item) => ({ code: 'compile_error', message: item.message, path: item.line === undefined ? 'source' : `source:${item.line}:${item.column ?? 0}` })),
        });
      }
      fn = { bundle: compiled.bundle };
    } else if (request.function_name !== undefined) {
      fn = await deployedByName(deps, request, request.function_name);
    } else {
      throw new AppError('invalid_body', 'Give the function as source or by function_name', { errors: [{ code: 'required', message: 'source or function_name is required', path: 'source' }] });
    }
    await requireConnection(deps.bus, request);
    const started = Date.now();
    const target = { environment_id: request.environment_id, provider_config_key: request.provider_config_key, connection_id: request.connection_id };
    const logs: LogEntry[] = [];
    const writes: RecordedWrite[] = [];
    // The run acts for the API key that asked, with the scopes the gateway resolved for it.
    const grants: Extract<CtxGrants, { kind: 'api_key' }> = { kind: 'api_key', scopes: new Set(request.caller_scopes), refused: [] };
    try {
      const outcome = await untilStopped(deps.stopping, () => deps.runner.run({ target, fn, input: request.input, dryRun: true, logs, writes, grants, signal: deps.stopping, maxWaitMs: SYNC_RUN_SLOT_WAIT_MS }));
      return {
        function: { type: outcome.definition.kind, name: outcome.definition.name },
        success: true,
        output: outcome.output === undefined ? null : (JSON.parse(outcome.output) as unknown),
        logs,
        writes: outcome.writes,
        duration_ms: Date.now() - started,
      };
    } catch (error) {
      const appError = toAppError(error);
      if (appError.retryable && appError.code !== 'internal_error') throw appError;
      // A run that failed after a ctx call was refused a scope says so, whatever the function made of it.
      const refused = grants.refused[0];
      const reported = refused && appError.code === 'function_failed' ? { code: 'forbidden', message: `This API key lacks the scope ${refused}: ${appError.message}` } : { code: appError.code, message: appError.message };
      return {
        function: { type: fn.description?.type ?? 'unknown', name: fn.description?.name ?? request.function_name ?? 'unknown' },
        success: false,
        error: reported,
        logs,
        writes,
        duration_ms: Date.now() - started,
      };
    }
  };
}

/**
 * Runs the integration's functions for a lifecycle event, one after the other; failures are
 * counted and logged. A run stopped by `signal` (its replica hands the event back) is no failure:
 * it throws, and the event is run again elsewhere. With `redelivered` (an event JetStream
 * delivers again), an outage of ours that failed a function throws once the others have run, so
 * the event comes again, and each function that ran to its end is marked and not run twice.
 */
async function runLifecycle(
  deps: FunctionDeps,
  event: 'post-connection-creation' | 'pre-connection-deletion',
  target: { environment_id: string; provider_config_key: string; connection_id: string },
  options: { signal?: AbortSignal; redelivered?: string } = {},
): Promise<{ ran: number; failed: number }> {
  const { signal, redelivered } = options;
  const names = await deps.bus.request(functionsContracts.listLifecycle, { environment_id: target.environment_id, provider_config_key: target.provider_config_key, event });
  let failed = 0;
  let outage: AppError | undefined;
  for (const name of names) {
    const ranKey = redelivered === undefined ? undefined : `${redelivered}:${name}`;
    try {
      if (ranKey !== undefined && (await deps.lifecycleRuns.isDone(ranKey))) continue;
      const fn = await deps.runner.loadFunction(target.environment_id, target.provider_config_key, 'on-event', name);
      await deps.runner.run({ target, fn, grants: ENVIRONMENT_GRANTS, ...(signal ? { signal } : {}) });
      if (ranKey !== undefined) await deps.lifecycleRuns.markDone(ranKey);
    } catch (error) {
      if (signal?.aborted) throw error;
      failed++;
      const appError = toAppError(error);
      if (ranKey !== undefined && isOurOutage(appError)) outage ??= appError;
      // The code only: the message of a function's own failure is what its code threw, which may
      // print anything (a secret); it goes to the debug log, like the function's own log lines.
      deps.logger.warn('a lifecycle function failed', { event, function: `${target.provider_config_key}/${name}`, code: appError.code });
      deps.logger.debug('a lifecycle function failed: its message', { event, function: `${target.provider_config_key}/${name}`, detail: appError.message });
    }
  }
  if (outage) throw outage;
  return { ran: names.length, failed };
}

export function preDeletionHandler(deps: FunctionDeps) {
  return (request: RequestOf<typeof actionContracts.runPreDeletion>) => untilStopped(deps.stopping, () => runLifecycle(deps, 'pre-connection-deletion', request, { signal: deps.stopping }));
}

/**
 * `connection.created`: the integration's post-creation functions run once the connection
 * exists; one that met an outage of ours (the vault restarting) runs again when the event comes
 * again, and only it.
 */
export function postCreationHandler(deps: FunctionDeps) {
  return async (event: PayloadOf<typeof vaultContracts.connectionCreated>, msg: Pick<JobMessage, 'seq'>, signal: AbortSignal) => {
    const target = { environment_id: event.environment_id, provider_config_key: event.provider_config_key, connection_id: event.connection_id };
    // This event, by its place in the stream: a reconnect's creation is another, and runs them all.
    await runLifecycle(deps, 'post-connection-creation', target, { signal, redelivered: `post-connection-creation:${event.environment_id}:${event.id}:${msg.seq}` });
  };
}

/**
 * `webhook.received`: a provider webhook routed to a connection goes to the `onWebhook` of each
 * of the integration's syncs subscribed to its type. A webhook for no connection is skipped. A run
 * stopped by `signal` (its replica hands the webhook back) is not announced: the webhook comes
 * again elsewhere, and its syncs' `onWebhook` run again (they upsert). One that met an outage of
 * ours (the vault or the records store restarting) is not announced either: once the others have
 * run, the webhook is handed back to come again, and the syncs that ran are marked, so only the
 * failed ones run then. Past `maxDeliveries`, the outage is the run's failure, announced as any.
 */
export function webhookHandler(deps: FunctionDeps, maxDeliveries: number) {
  return async (event: PayloadOf<typeof webhookContracts.received>, msg: Pick<JobMessage, 'info'>, signal: AbortSignal) => {
    if (event.connection_id === null) return;
    const syncs = await deps.bus.request(functionsContracts.listWebhookSyncs, { environment_id: event.environment_id, provider_config_key: event.provider_config_key });
    const type = webhookType(event.payload);
    const target = { environment_id: event.environment_id, provider_config_key: event.provider_config_key, connection_id: event.connection_id };
    const again = msg.info.deliveryCount > 1;
    const lastDelivery = msg.info.deliveryCount >= maxDeliveries;
    const ran: string[] = [];
    let outage: AppError | undefined;
    for (const sync of syncs.filter((candidate) => subscribes(candidate.webhook_subscriptions, type))) {
      const ranKey = `webhook:${event.environment_id}:${event.inbound_id}:${sync.name}`;
      if (again && (await deps.lifecycleRuns.isDone(ranKey))) continue;
      // Writes go to the records store as in `exec`: the sync's models, its `base` variant.
      const counts: ModelCounts = {};
      const startedAt = new Date().toISOString();
      let failure: { code: string; message: string } | undefined;
      try {
        const fn = await deps.runner.loadFunction(event.environment_id, event.provider_config_key, 'sync', sync.name);
        const models = new Map<string, ModelField[]>(fn.description.type === 'sync' ? fn.description.models.map((model) => [model.name, model.fields]) : []);
        await deps.runner.run({ target, fn, entry: 'onWebhook', input: event.payload ?? null, sync: { variant: 'base', models, counts }, grants: ENVIRONMENT_GRANTS, signal });
      } catch (error) {
        if (signal.aborted) throw error;
        const appError = toAppError(error);
        // As a lifecycle function's failure: the code here, the function's message at debug only.
        deps.logger.warn('a sync\'s onWebhook failed', { function: `${event.provider_config_key}/${sync.name}`, inbound_id: event.inbound_id, code: appError.code });
        deps.logger.debug('a sync\'s onWebhook failed: its message', { function: `${event.provider_config_key}/${sync.name}`, inbound_id: event.inbound_id, detail: appError.message });
        if (isOurOutage(appError) && !lastDelivery) {
          outage ??= appError;
          continue;
        }
        failure = { code: appError.code, message: appError.message.slice(0, 2000) };
      }
      // Announced like a run (once per webhook and sync): changed models send the `sync` webhook, a
      // failure shows on the connection. An announcement the sync-scheduler did not take is made
      // again with the sync's run, when the webhook comes again; the other syncs run now.
      if (failure || Object.keys(counts).length > 0) {
        try {
          await deps.bus.request(syncContracts.webhookRunFinished, {
            environment_id: event.environment_id,
            run_id: `webhook-${event.inbound_id}-${sync.name}`,
            provider_config_key: event.provider_config_key,
            connection_id: event.connection_id,
            sync_name: sync.name,
            started_at: startedAt,
            results: counts,
            ...(failure ? { status: 'ERROR' as const, error: failure } : { status: 'SUCCESS' as const }),
          });
        } catch (error) {
          outage ??= toAppError(error);
          continue;
        }
      }
      ran.push(ranKey);
    }
    if (outage) {
      // Marked only when the webhook is to come again: most webhooks meet no outage.
      for (const key of ran) await deps.lifecycleRuns.markDone(key);
      throw outage;
    }
  };
}
