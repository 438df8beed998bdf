import type { JobMessage } from '@latchkey/bus';
import { syncContracts, type ModelCounts, type ModelField, type PayloadOf, type SyncCheckpoint } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import { repeatEvery } from '@latchkey/runtime';
import type { ActionDeps } from '../domain/action-deps.js';
import { ENVIRONMENT_GRANTS, countWrites } from '../domain/host.js';
import { observeSyncRun } from '../run-metrics.js';

/** A run whose infrastructure keeps failing (not the function: it fails once) is recorded as failed after this many deliveries. */
const MAX_DELIVERIES = 5;

export interface RunSyncOptions {
  /**
   * How often a running attempt reports its counts, whatever it writes (SYNC_PROGRESS_INTERVAL_MS):
   * well under the sync-scheduler's SYNC_RUN_STALE_MS, past which a run that has not reported is
   * taken for lost and another run of its schedule starts.
   */
  progressEveryMs: number;
}

/**
 * Runs one queued sync run (JetStream delivers at least once). The scheduler says what to run,
 * or that the run already finished (then nothing runs again). The function's `exec` runs with
 * the connection; `batchSave` / `batchUpdate` / `batchDelete` write to the records store in the
 * run's variant, and each write reports the counts so far (`GET /sync/status` shows them). A
 * crash mid-run means a redelivery runs it again, with the checkpoint the function saved last,
 * so it carries on from there: records are upserted by id and unchanged ones are not rewritten,
 * so nothing is doubled or lost either way. A replica that stops hands the run back at once
 * (`signal`): its isolate is disposed, the run is not finished, and the message goes to another
 * replica, which carries on from that checkpoint.
 */
export function runSyncHandler(deps: Pick<ActionDeps, 'bus' | 'logger' | 'runner'>, options: RunSyncOptions) {
  return async (job: PayloadOf<typeof syncContracts.run>, msg: JobMessage, signal: AbortSignal) => {
    const { run } = await deps.bus.request(syncContracts.beginRun, { environment_id: job.environment_id, run_id: job.run_id });
    if (!run) return;
    // Each attempt counts what it writes itself; a resumed one finds the earlier writes
    // unchanged, so the run's counts are what earlier attempts reported plus these. They decide
    // the run's `sync` webhooks: records a cut-off attempt added are announced too.
    const counts: ModelCounts = {};
    const earlier = run.results ?? {};
    const runCounts = () => addCounts(earlier, counts);
    // This attempt's number names its reports, writes and end: the scheduler refuses them once
    // another attempt of the run began (a scheduler from before attempts gives none).
    const attempt = run.attempt === undefined ? {} : { attempt: run.attempt };
    const progress = { environment_id: job.environment_id, run_id: job.run_id, ...attempt };
    const report = async (checkpoint?: SyncCheckpoint | null) => {
      if (checkpoint !== undefined) {
        const { recorded } = await deps.bus.request(syncContracts.reportProgress, { ...progress, results: runCounts(), checkpoint });
        if (!recorded) throw new AppError('function_failed', 'This sync run is over, or went on in a later attempt: its checkpoint was not saved');
        return;
      }
      // Counts are for `GET /sync/status` and the run's end: a report that fails costs freshness, and the end's count of a later cut-off.
      await deps.bus.request(syncContracts.reportProgress, { ...progress, results: runCounts() }).catch((error: unknown) => {
        deps.logger.warn('could not report a sync run\'s progress', { error });
      });
    };
    let outcome: { status: 'SUCCESS' } | { status: 'ERROR'; error: { code: string; message: string } };
    const started = performance.now();
    // This attempt's writes stop when it ends, however it ends (handed back, failed, done): a
    // batch the function did not await must not go on writing beside the attempt that follows.
    const ended = new AbortController();
    const handBack = () => ended.abort(signal.reason);
    signal.addEventListener('abort', handBack, { once: true });
    // Writes and checkpoints report as they come, but a sync may go a long while without either
    // (paging a slow API, collecting everything before one write): the scheduler would take it
    // for lost and start another run beside it. So the attempt also reports on a timer while it
    // runs, and stops when it ends however it ends; a replica that dies stops reporting with it.
    // `report` without a checkpoint says its own failures.
    const reporting = repeatEvery(options.progressEveryMs, () => report(), () => undefined);
    try {
      const fn = await deps.runner.loadFunction(job.environment_id, run.provider_config_key, 'sync', run.sync_name);
      const description = fn.description;
      const models = new Map<string, ModelField[]>(description.type === 'sync' ? description.models.map((model) => [model.name, model.fields]) : []);
      await deps.runner.run({
        target: { environment_id: job.environment_id, provider_config_key: run.provider_config_key, connection_id: run.connection_id },
        fn,
        sync: { variant: run.variant, models, counts, scheduled: { runId: job.run_id, ...attempt, checkpoint: run.checkpoint ?? null, report, signal: ended.signal } },
        grants: ENVIRONMENT_GRANTS,
        signal,
      });
      outcome = { status: 'SUCCESS' };
    } catch (error) {
      // Handed back: not a failure of the run; the consumer naks it for another replica.
      if (signal.aborted) {
        observeSyncRun('handed_back', (performance.now() - started) / 1000, counts);
        throw error;
      }
      const appError = toAppError(error);
      // The bus or a service was away: try again later (the records written so far stay), unless it failed too often.
      if (appError.retryable && msg.info.deliveryCount < MAX_DELIVERIES) {
        observeSyncRun('retrying', (performance.now() - started) / 1000, counts);
        throw appError;
      }
      outcome = { status: 'ERROR', error: { code: appError.code, message: appError.message.slice(0, 2000) } };
      deps.logger.info('a sync run failed', { sync: `${run.provider_config_key}/${run.sync_name}`, variant: run.variant, code: appError.code });
    } finally {
      signal.removeEventListener('abort', handBack);
      ended.abort();
      // Once the attempt's writes are stopped: no progress report lands after the run's end.
      await reporting.stop();
    }
    observeSyncRun(outcome.status === 'SUCCESS' ? 'success' : 'error', (performance.now() - started) / 1000, counts);
    await deps.bus.request(syncContracts.finishRun, { ...progress, results: runCounts(), ...outcome });
  };
}

/** Two attempts' counts, model by model. */
function addCounts(a: ModelCounts, b: ModelCounts): ModelCounts {
  const sum: ModelCounts = {};
  for (const counts of [a, b]) for (const [model, written] of Object.entries(counts)) countWrites(sum, model, written);
  return sum;
}
