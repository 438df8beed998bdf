import type { ModelCounts } from '@latchkey/contracts';
import { counter, histogram } from '@latchkey/metrics';

const actionRuns = counter('latchkey_action_runs_total');
const actionDuration = histogram('latchkey_action_run_duration_seconds');
const timeouts = counter('latchkey_sandbox_timeouts_total');
const memoryKills = counter('latchkey_sandbox_memory_kills_total');
const syncRuns = counter('latchkey_sync_runs_total');
const syncDuration = histogram('latchkey_sync_run_duration_seconds');
const recordsWritten = counter('latchkey_records_written_total');

/**
 * One sandbox run: its kind (the function type, `dryrun` for source not deployed yet) and
 * outcome (`success`, the error code from the one error table, or `handed_back`: stopped because
 * its replica was stopping): both bounded.
 */
export function observeFunctionRun(kind: string, errorCode: string | undefined, seconds: number): void {
  actionRuns.inc({ kind, outcome: errorCode ?? 'success' });
  actionDuration.observe({ kind }, seconds);
  if (errorCode === 'function_timed_out') timeouts.inc();
  else if (errorCode === 'function_memory_exceeded') memoryKills.inc();
}

/**
 * One attempt at a scheduled sync run: `success`, `error` (the run ended failed), `retrying`
 * (a service was away; JetStream delivers it again) or `handed_back` (its replica was stopping;
 * another resumes it from its checkpoint). Records written: what this attempt changed.
 */
export function observeSyncRun(outcome: 'success' | 'error' | 'retrying' | 'handed_back', seconds: number, counts: ModelCounts): void {
  syncRuns.inc({ outcome });
  syncDuration.observe({ outcome }, seconds);
  let written = 0;
  for (const model of Object.values(counts)) written += model.added + model.updated + model.deleted;
  if (written > 0) recordsWritten.inc(written);
}
