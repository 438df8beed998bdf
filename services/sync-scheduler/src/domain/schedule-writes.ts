import { writesOneAtATime, type KvLocks } from '@latchkey/bus';
import type { ScheduleRepo } from '../db/schedule-repo.js';

export interface ScheduleWritesOptions {
  /** How long a write waits for the writes before it to finish; past it, service_unavailable. */
  waitMs?: number;
}

/** Writes to ids at once, each under its own key (pausing every schedule of an integration). */
const MANY_AT_ONCE = 16;

/**
 * One write at a time to each schedule (and its runs), across every scheduler replica, as the
 * vault does for connections (serialized-writes.ts there): FerretDB writes an updated document
 * back whole, so a pause meeting a run's checkpoint, or a claim meeting a frequency change, lost
 * one of the two. The run slot already keeps two runs from starting; this keeps the writes of the
 * run in flight, of the scheduler and of users from undoing one another. Each write holds the
 * schedule's key in the `sync_schedule_locks` KV bucket (one holder, renewed while it writes; the
 * short TTL frees a dead holder's key). Reads take none.
 */
export function serializedScheduleWrites(repo: ScheduleRepo, locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, options: ScheduleWritesOptions = {}): ScheduleRepo {
  const alone = writesOneAtATime(locks, 'schedule', 'Another write to this schedule is still under way; try again', options.waitMs);
  async function each(ids: readonly string[], write: (id: string) => Promise<number>): Promise<number> {
    let total = 0;
    for (let start = 0; start < ids.length; start += MANY_AT_ONCE) {
      const counts = await Promise.all(ids.slice(start, start + MANY_AT_ONCE).map((id) => alone(id, () => write(id))));
      for (const count of counts) total += count;
    }
    return total;
  }

  return {
    ...repo,
    ensure: (environment, target, frequency, firstRunAt, connection) =>
      alone(repo.idOf(environment, target), () => repo.ensure(environment, target, frequency, firstRunAt, connection)),
    setPaused: (ids, paused) => each(ids, (id) => repo.setPaused([id], paused)),
    // A claim meeting a removal could put back the slot it had just read, and start a run for a
    // deleted variant or connection.
    remove: async (ids) => {
      await each(ids, async (id) => {
        await repo.remove([id]);
        return 1;
      });
    },
    setFrequencyOverride: (id, frequency, nextRunAt) => alone(id, () => repo.setFrequencyOverride(id, frequency, nextRunAt)),
    setDeployedFrequency: (id, frequency, nextRunAt) => alone(id, () => repo.setDeployedFrequency(id, frequency, nextRunAt)),
    claim: (schedule, runId, nextRunAt, now) => alone(schedule._id, () => repo.claim(schedule, runId, nextRunAt, now)),
    markQueued: (run, at) => alone(run.schedule_id, () => repo.markQueued(run, at)),
    abandonUnqueued: (run, now) => alone(run.schedule_id, () => repo.abandonUnqueued(run, now)),
    beginAttempt: (run, at) => alone(run.schedule_id, () => repo.beginAttempt(run, at)),
    recordProgress: (run, results, checkpoint, at, attempt) => alone(run.schedule_id, () => repo.recordProgress(run, results, checkpoint, at, attempt)),
    clearCheckpoint: (scheduleId) => alone(scheduleId, () => repo.clearCheckpoint(scheduleId)),
    finish: (run, outcome, at, attempt) => alone(run.schedule_id, () => repo.finish(run, outcome, at, attempt)),
    free: (run) => alone(run.schedule_id, () => repo.free(run)),
  };
}
