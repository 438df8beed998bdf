import { randomUUID } from 'node:crypto';
import type { JobMessage } from '@latchkey/bus';
import { actionContracts, type PayloadOf, type RequestOf } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import { currentRequestId } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { ActionRunDoc } from '../db/action-run-model.js';
import { SYNC_RUN_SLOT_WAIT_MS, isOurOutage, untilStopped, type ActionDeps } from '../domain/action-deps.js';
import { ENVIRONMENT_GRANTS } from '../domain/host.js';
import { outputForReply } from '../domain/output.js';
import { requireConnection, type ConnectionRef } from '../domain/require-connection.js';

/** Async runs whose infrastructure keeps failing (not the function: it fails once) give up after this many deliveries. */
const MAX_DELIVERIES = 8;

async function checkConnection(deps: Pick<ActionDeps, 'bus' | 'connections'>, request: ConnectionRef) {
  if (deps.connections.has(request.environment_id, request.provider_config_key, request.connection_id)) return;
  await requireConnection(deps.bus, request);
  deps.connections.add(request.environment_id, request.provider_config_key, request.connection_id);
}

export function triggerActionHandler(deps: ActionDeps) {
  return async (request: RequestOf<typeof actionContracts.trigger>) => {
    const [fn] = await Promise.all([
      deps.runner.loadFunction(request.environment_id, request.provider_config_key, 'action', request.action_name),
      checkConnection(deps, request),
    ]);
    const target = { environment_id: request.environment_id, provider_config_key: request.provider_config_key, connection_id: request.connection_id };
    if (request.async) {
      const id = randomUUID();
      await deps.runs.insert({
        _id: id,
        ...target,
        action_name: request.action_name,
        input_json: request.input === undefined ? null : JSON.stringify(request.input),
        status: 'queued',
        output_json: null,
        error: null,
        attempts: 0,
        created_at: new Date(),
        completed_at: null,
      });
      await deps.bus.enqueue(actionContracts.run, { environment_id: request.environment_id, id }, { msgId: `action-run-${id}` });
      return { status: 'queued' as const, id };
    }
    const outcome = await untilStopped(deps.stopping, () =>
      deps.runner.run({ target, fn, input: request.input, grants: ENVIRONMENT_GRANTS, signal: deps.stopping, maxWaitMs: SYNC_RUN_SLOT_WAIT_MS }),
    );
    return { status: 'done' as const, output: outputForReply(deps.bus, outcome.output, deps.streamIdleMs) };
  };
}

export function getActionResultHandler(deps: ActionDeps) {
  return async (request: RequestOf<typeof actionContracts.getResult>) => {
    const run = await deps.runs.get(environmentId(request.environment_id), request.id);
    if (!run) throw new AppError('unknown_action_run', `No async action has the id "${request.id}"`);
    if (run.status === 'done') return { status: 'done' as const, output: outputForReply(deps.bus, run.output_json, deps.streamIdleMs) };
    if (run.status === 'failed') return { status: 'failed' as const, error: run.error ?? { code: 'function_failed', message: 'The action failed' } };
    return { status: run.status };
  };
}

/**
 * Runs one queued async action (JetStream delivers at least once). A run that already finished
 * is not run again; its completion event is published again under the same message id, which
 * JetStream deduplicates, so a crash between the two writes loses nothing and doubles nothing.
 * A crash during the run means the function runs again on redelivery: functions behind async
 * actions should be idempotent. So does a run still going when its stopping replica hands it
 * back (`signal`, once the consumer's grace is over): it is not recorded, and runs again elsewhere.
 */
export function runAsyncActionHandler(deps: ActionDeps) {
  return async (job: PayloadOf<typeof actionContracts.run>, msg: JobMessage, signal: AbortSignal) => {
    const environment = environmentId(job.environment_id);
    let run = await deps.runs.get(environment, job.id);
    if (!run) {
      deps.logger.warn('an async action job names no run', { id: job.id });
      return;
    }
    // A later delivery took the run over (this replica stalled past the ack wait): it is theirs.
    if (run.status === 'running' && run.attempts > msg.info.deliveryCount) return;
    if (run.status === 'queued' || run.status === 'running') run = await runOnce(deps, run, msg, signal);
    await deps.bus.publish(
      actionContracts.asyncCompleted,
      {
        environment_id: run.environment_id,
        id: run._id,
        statusUrl: `/action/${run._id}`,
        action_name: run.action_name,
        provider_config_key: run.provider_config_key,
        connection_id: run.connection_id,
        success: run.status === 'done',
        ...(run.error ? { error: run.error } : {}),
        completed_at: (run.completed_at ?? new Date()).toISOString(),
      },
      { msgId: `action-${run._id}` },
    );
  };
}

/** Runs a queued or interrupted async action and records its outcome (the first outcome wins). */
async function runOnce(deps: ActionDeps, run: ActionRunDoc, msg: JobMessage, signal: AbortSignal): Promise<ActionRunDoc> {
  const environment = environmentId(run.environment_id);
  await deps.runs.markRunning(environment, run._id, msg.info.deliveryCount);
  const startedAt = Date.now();
  const target = { environment_id: run.environment_id, provider_config_key: run.provider_config_key, connection_id: run.connection_id };
  let outcome: { status: 'done'; output_json: string; error: null } | { status: 'failed'; output_json: null; error: { code: string; message: string } };
  try {
    const fn = await deps.runner.loadFunction(run.environment_id, run.provider_config_key, 'action', run.action_name);
    const result = await deps.runner.run({ target, fn, input: run.input_json === null ? undefined : JSON.parse(run.input_json), grants: ENVIRONMENT_GRANTS, signal });
    outcome = { status: 'done', output_json: result.output ?? 'null', error: null };
  } catch (error) {
    // Handed back (this replica is stopping): the run stays `running`, for the next delivery.
    if (signal.aborted) throw error;
    const appError = toAppError(error);
    // The bus or a service was away: try again later, unless it has failed too often.
    if (isOurOutage(appError) && msg.info.deliveryCount < MAX_DELIVERIES) throw appError;
    outcome = { status: 'failed', output_json: null, error: { code: appError.code, message: appError.message } };
  }
  await deps.runs.finish(environment, run._id, outcome);
  const requestId = currentRequestId();
  deps.operations.record({
    type: 'action_run',
    environment_id: run.environment_id,
    status: outcome.status === 'done' ? 'success' : 'failure',
    started_at: new Date(startedAt).toISOString(),
    duration_ms: Date.now() - startedAt,
    integration_id: run.provider_config_key,
    connection_id: run.connection_id,
    ...(requestId === undefined ? {} : { request_id: requestId }),
    ...(outcome.error ? { error: { code: outcome.error.code, message: outcome.error.message.slice(0, 1000) } } : {}),
  });
  return (await deps.runs.get(environment, run._id)) ?? run;
}
