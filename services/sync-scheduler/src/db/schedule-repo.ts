import type { Connection } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import type { ModelCounts } from '@latchkey/contracts';
import { runSlotModel, scheduleKey, scheduleModel, syncRunModel, type ScheduleDoc, type ScheduleTiming, type SyncRunDoc } from './schedule-model.js';

export interface ScheduleTarget {
  provider_config_key: string;
  connection_id: string;
  sync_name: string;
  variant: string;
}

export interface ScheduleRepoOptions {
  /**
   * A run slot held longer than this is taken to be lost (its job, or its finish report, never
   * arrived): the next claim marks that run abandoned and takes the schedule, so one lost
   * message cannot stop a sync for good.
   */
  staleRunMs?: number;
  /**
   * A run not begun this long after its claim, and whose job was never stored (the claiming
   * replica died before queueing it, or the publish was lost), is taken to be lost sooner: the
   * next claim marks it abandoned. A run whose job was stored (`markQueued`: it waits its turn
   * in JetStream), and one that began, keep their slot until `staleRunMs` without a report.
   */
  unstartedRunMs?: number;
  /**
   * Told the ids of schedules whose due state (next run, paused, run in flight) was just written
   * or which were removed, after the write: the service broadcasts them to the leader's due index.
   */
  onChange?: (ids: readonly string[]) => void;
}

/** A run's states while it may still write, report and end. */
const LIVE: SyncRunDoc['status'][] = ['QUEUED', 'RUNNING'];

/** How many old runs one read of the sweep names, each then deleted by `_id`. */
const SWEEP_BATCH = 1000;
/** Deletes by `_id` in flight at once in the sweep. */
const DELETES_AT_ONCE = 16;

/**
 * Whether a run that holds its schedule's slot may still be alive (before the stale limit):
 * begun, or waiting in JetStream for a runner. One never recorded, already over, or whose job was
 * never stored (or a run from before `queued_at` was kept, not begun) holds nothing.
 */
const mayBeAlive = (run: Pick<SyncRunDoc, 'status' | 'queued_at'> | null) =>
  run !== null && (run.status === 'RUNNING' || (run.status === 'QUEUED' && run.queued_at != null));

/** A stored checkpoint: its JSON text, or the object a schedule saved before held. */
function checkpointOf(stored: unknown): Record<string, unknown> | null {
  if (typeof stored === 'string') return JSON.parse(stored) as Record<string, unknown>;
  return stored !== null && typeof stored === 'object' ? (stored as Record<string, unknown>) : null;
}

export function createScheduleRepo(mongo: Connection, options: ScheduleRepoOptions = {}) {
  const staleRunMs = options.staleRunMs ?? 3_600_000;
  const unstartedRunMs = Math.min(options.unstartedRunMs ?? 120_000, staleRunMs);
  const schedules = scheduleModel(mongo);
  const runs = syncRunModel(mongo);
  const slots = runSlotModel(mongo);
  const changed = (...ids: string[]) => {
    if (ids.length > 0) options.onChange?.(ids);
  };
  /** A schedule whole, its checkpoint read back from its JSON text. */
  const readSchedule = async (scheduleId: string): Promise<ScheduleDoc | null> => {
    const doc = await schedules.findById(scheduleId).lean<Omit<ScheduleDoc, 'checkpoint'> & { checkpoint: unknown }>().exec();
    return doc === null ? null : { ...doc, checkpoint: checkpointOf(doc.checkpoint) };
  };
  /**
   * Frees the schedule of a run that is over, if it still names that run: `finish`'s last step,
   * done again when a replica stopped between the run's outcome and this.
   */
  const free = async (run: Pick<SyncRunDoc, '_id' | 'schedule_id' | 'status' | 'results' | 'error' | 'finished_at'>) => {
    await slots.deleteOne({ _id: run.schedule_id, run_id: run._id }).exec();
    await schedules
      .updateOne({ _id: run.schedule_id, running: run._id }, { $set: { running: null, last_status: run.status, last_finished_at: run.finished_at, last_results: run.results, last_error: run.error } })
      .exec();
    changed(run.schedule_id);
  };
  const idOf = (environment: EnvironmentId, target: ScheduleTarget) =>
    scheduleKey(environment, target.provider_config_key, target.connection_id, target.sync_name, target.variant);

  return {
    init: async () => {
      await schedules.init();
      await runs.init();
      await slots.init();
    },
    idOf,
    get: (environment: EnvironmentId, target: ScheduleTarget) => readSchedule(idOf(environment, target)),
    /**
     * Creates the schedule when absent (idempotent); an existing one keeps its state but takes the
     * deployment's frequency, and `connection` (the vault's numeric id of the connection) when it
     * had none. One made for another connection of the name is left as it is: the caller removes it.
     */
    async ensure(environment: EnvironmentId, target: ScheduleTarget, frequency: string, firstRunAt: Date, connection?: number): Promise<'created' | 'existing'> {
      const _id = idOf(environment, target);
      try {
        await schedules.create({
          _id,
          environment_id: environment,
          ...target,
          connection: connection ?? null,
          frequency,
          frequency_override: null,
          paused: false,
          running: null,
          next_run_at: firstRunAt,
          last_status: null,
          last_finished_at: null,
          last_results: {},
          last_error: null,
          checkpoint: null,
          created_at: new Date(),
        });
        changed(_id);
        return 'created';
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        if (connection === undefined) await schedules.updateOne({ _id }, { $set: { frequency } }).exec();
        // `null` matches a schedule without the field too.
        else await schedules.updateOne({ _id, connection: { $in: [null, connection] } }, { $set: { frequency, connection } }).exec();
        return 'existing';
      }
    },
    /** The schedules of an integration, optionally of one connection (all variants). */
    list: (environment: EnvironmentId, providerConfigKey: string, connectionId?: string) =>
      schedules
        // Without checkpoints (up to 64 KiB each): only a run reads its own (`getSchedule`).
        .find({ environment_id: environment, provider_config_key: providerConfigKey, ...(connectionId === undefined ? {} : { connection_id: connectionId }) }, { checkpoint: 0 })
        .sort({ connection_id: 1, sync_name: 1, variant: 1 })
        .lean<Array<Omit<ScheduleDoc, 'checkpoint'>>>()
        .exec(),
    /**
     * Every schedule, for the leader's due index: one read of the whole collection
     * (what FerretDB does for any query on `next_run_at`), made when a replica starts leading and
     * every `SCHEDULER_RESCAN_MS`, instead of on every tick. Without checkpoints (up to 64 KiB
     * each) and last results: tens of thousands of schedules must not cost the leader gigabytes.
     */
    all: () => schedules.find({}, { checkpoint: 0, last_results: 0, last_error: 0 }).lean<ScheduleTiming[]>().exec(),
    /** One update by `_id` each: FerretDB answers `_id` equality from an index, a list (`$in`) by reading every schedule. */
    async setPaused(ids: readonly string[], paused: boolean) {
      let modified = 0;
      for (const id of ids) modified += (await schedules.updateOne({ _id: id }, { $set: { paused } }).exec()).modifiedCount;
      changed(...ids);
      return modified;
    },
    async setFrequencyOverride(id: string, frequency: string | null, nextRunAt: Date) {
      const result = await schedules.updateOne({ _id: id }, { $set: { frequency_override: frequency, next_run_at: nextRunAt } }).exec();
      changed(id);
      return result;
    },
    /**
     * A redeploy's frequency: the schedule takes it, and its next run moves to `nextRunAt`, unless
     * an override of its own times it (whose next run stays; reverting it finds this frequency).
     */
    async setDeployedFrequency(id: string, frequency: string, nextRunAt: Date) {
      const retimed = await schedules.updateOne({ _id: id, frequency_override: null }, { $set: { frequency, next_run_at: nextRunAt } }).exec();
      if (retimed.matchedCount === 0) await schedules.updateOne({ _id: id }, { $set: { frequency } }).exec();
      changed(id);
    },
    /**
     * Removes schedules (a variant deleted, a connection gone) with their slots, ending the runs
     * they hold first: such a run learns it is over at its next checkpoint, its end changes
     * nothing, and a schedule made again in its place runs alone.
     */
    async remove(ids: readonly string[]) {
      // One schedule at a time, each read and write by `_id`: FerretDB answers a list of ids
      // (`$in`) by reading the whole collection, and `sync_runs` holds every run kept.
      for (const id of ids) {
        const held = await slots.findById(id).lean<{ run_id: string }>().exec();
        if (held) {
          await runs
            .updateOne(
              { _id: held.run_id, status: { $in: LIVE } },
              { $set: { status: 'ERROR', error: { code: 'sync_run_abandoned', message: 'Its schedule was removed (the variant or the connection was deleted)' }, finished_at: new Date() } },
            )
            .exec();
        }
        await schedules.deleteOne({ _id: id }).exec();
        await slots.deleteOne({ _id: id }).exec();
      }
      changed(...ids);
    },
    /**
     * Takes the schedule for a new run: succeeds only while no run is in flight (the insert of
     * its slot, unique by `_id`), then records the run. Returns the run, or null when one runs.
     */
    async claim(schedule: ScheduleTiming, runId: string, nextRunAt: Date, now: Date): Promise<SyncRunDoc | null> {
      const take = async () => {
        try {
          await slots.create({ _id: schedule._id, run_id: runId, claimed_at: now });
          return true;
        } catch (error) {
          if (isDuplicateKey(error)) return false;
          throw error;
        }
      };
      if (!(await take())) {
        const held = await slots
          .findOne({ _id: schedule._id, claimed_at: { $lt: new Date(now.getTime() - unstartedRunMs) } })
          .lean()
          .exec();
        if (!held) return null;
        // Held past the unstarted limit: lost unless its run may still be alive (begun, or its
        // job stored and waiting for a runner) and claimed or reported within the stale limit.
        const stale =
          held.claimed_at < new Date(now.getTime() - staleRunMs) ||
          !mayBeAlive(await runs.findById(held.run_id, { status: 1, queued_at: 1 }).lean<Pick<SyncRunDoc, 'status' | 'queued_at'>>().exec())
            ? held
            : null;
        if (!stale) return null;
        // One claimer takes a stale slot over: the one whose insert of a marker for that run wins.
        // Removing the slot cannot decide it alone: FerretDB deletes by `_id` what an earlier read
        // matched, so a second remover could delete the slot the first had just inserted again.
        const marker = `${schedule._id}:takeover:${stale.run_id}`;
        try {
          await slots.create({ _id: marker, run_id: runId, claimed_at: now });
        } catch (error) {
          if (isDuplicateKey(error)) return null;
          throw error;
        }
        try {
          if ((await slots.deleteOne({ _id: schedule._id, run_id: stale.run_id }).exec()).deletedCount !== 1) return null;
          // Its job, should it still arrive, finds the run ended and does nothing.
          await runs
            .updateOne(
              { _id: stale.run_id, status: { $in: LIVE } },
              { $set: { status: 'ERROR', error: { code: 'sync_run_abandoned', message: 'The run did not report back in time; a new run took its place' }, finished_at: now } },
            )
            .exec();
          // A claim that came meanwhile (the slot was free) wins: still one run.
          if (!(await take())) return null;
        } finally {
          // A later claimer that read the stale slot before it went finds nothing left to remove.
          await slots.deleteOne({ _id: marker }).exec();
        }
      }
      // `nextRunAt` comes of the frequency the claimer read: a frequency change since has set the
      // next run itself (from the last run), and keeps it.
      const timing = { _id: schedule._id, frequency: schedule.frequency, frequency_override: schedule.frequency_override ?? null };
      const retimed = (await schedules.updateOne(timing, { $set: { running: runId, next_run_at: nextRunAt } }).exec()).matchedCount === 0;
      // Removed since the claimer read it (its variant or connection deleted): no run, and the
      // slot just made goes too (the removal's own delete of slots may have come before it).
      if (retimed && (await schedules.updateOne({ _id: schedule._id }, { $set: { running: runId } }).exec()).matchedCount === 0) {
        await slots.deleteOne({ _id: schedule._id, run_id: runId }).exec();
        return null;
      }
      changed(schedule._id);
      const run: SyncRunDoc = {
        _id: runId,
        environment_id: schedule.environment_id,
        schedule_id: schedule._id,
        provider_config_key: schedule.provider_config_key,
        connection_id: schedule.connection_id,
        sync_name: schedule.sync_name,
        variant: schedule.variant,
        status: 'QUEUED',
        results: {},
        error: null,
        created_at: now,
        queued_at: null,
        started_at: null,
        finished_at: null,
      };
      await runs.create(run);
      return run;
    },
    /**
     * Marks a run whose job JetStream acknowledged: it now waits its turn behind the jobs before
     * it, however long the runners are busy, and a claim in the meantime leaves it its schedule
     * until the stale limit instead of replacing it with a run at the back of the queue. A run
     * that began meanwhile (its job delivered at once) or ended is left as it is.
     */
    async markQueued(run: Pick<SyncRunDoc, '_id' | 'schedule_id'>, at: Date): Promise<void> {
      await runs.updateOne({ _id: run._id, status: 'QUEUED' }, { $set: { queued_at: at } }).exec();
    },
    /**
     * Gives a schedule back when its run's job could not be queued, once the run is over: a job
     * stored after all (its acknowledgement lost) then finds the run ended and runs nothing beside
     * the next run. False, and the schedule kept, when that job came and the run began meanwhile.
     * Safe to call again: a call that ended the run and stopped short of freeing the schedule
     * (the database went away) is finished by the next.
     */
    async abandonUnqueued(run: Pick<SyncRunDoc, '_id' | 'schedule_id'>, now: Date): Promise<boolean> {
      const ended = await runs
        .updateOne({ _id: run._id, status: 'QUEUED' }, { $set: { status: 'ERROR', error: { code: 'sync_run_abandoned', message: 'The run\'s job could not be queued' }, finished_at: now } })
        .exec();
      if (ended.matchedCount !== 1 && !(await runs.exists({ _id: run._id, status: 'ERROR', 'error.code': 'sync_run_abandoned' }))) return false;
      await slots.deleteOne({ _id: run.schedule_id, run_id: run._id }).exec();
      await schedules.updateOne({ _id: run.schedule_id, running: run._id }, { $set: { running: null } }).exec();
      changed(run.schedule_id);
      return true;
    },
    /**
     * Forgets runs finished before `finishedBefore`, and runs never finished created before
     * `unfinishedCreatedBefore` (past the jobs stream's age, no job of theirs can come). A schedule
     * keeps its last outcome itself; a run is read only while it is its schedule's current one,
     * and by its job. Read `batch` ids at a time (FerretDB reads the whole collection for each
     * such read, whatever the limit), each deleted by `_id`. Returns how many went.
     */
    async removeOldRuns(bounds: { finishedBefore: Date; unfinishedCreatedBefore: Date }, batch = SWEEP_BATCH): Promise<number> {
      let removed = 0;
      for (const expired of [{ finished_at: { $lt: bounds.finishedBefore } }, { finished_at: null, created_at: { $lt: bounds.unfinishedCreatedBefore } }]) {
        for (;;) {
          const ids = (await runs.find(expired, { _id: 1 }).limit(batch).lean<Array<{ _id: string }>>().exec()).map((doc) => doc._id);
          let gone = 0;
          for (let at = 0; at < ids.length; at += DELETES_AT_ONCE) {
            const deleted = await Promise.all(ids.slice(at, at + DELETES_AT_ONCE).map((id) => runs.deleteOne({ _id: id }).exec()));
            for (const result of deleted) gone += result.deletedCount;
          }
          removed += gone;
          // A short batch was the last; one that deleted nothing would only be read again.
          if (ids.length < batch || gone === 0) break;
        }
      }
      return removed;
    },
    getRun: (environment: EnvironmentId, runId: string) => runs.findOne({ _id: runId, environment_id: environment }).lean<SyncRunDoc>().exec(),
    /**
     * A runner claims the run (its job delivered, or delivered again): the run is marked begun
     * (when first claimed) and counts one more attempt. Returns the run as it now stands, whose
     * `attempt` is this claim's; null when the run is over. Read and written under the
     * schedule's write key (`serializedScheduleWrites`), as every write to its runs is.
     */
    async beginAttempt(run: Pick<SyncRunDoc, '_id' | 'schedule_id'>, at: Date): Promise<SyncRunDoc | null> {
      const current = await runs.findById(run._id).lean<SyncRunDoc>().exec();
      if (!current || !LIVE.includes(current.status)) return null;
      const begun = { status: 'RUNNING' as const, started_at: current.started_at ?? at, attempt: (current.attempt ?? 0) + 1 };
      const written = await runs.updateOne({ _id: run._id, status: { $in: LIVE } }, { $set: begun }).exec();
      return written.matchedCount === 1 ? { ...current, ...begun } : null;
    },
    /**
     * A run in flight reports its counts so far (and saves or clears its schedule's checkpoint).
     * The report also renews the run's slot, so a run that keeps reporting is never taken for
     * lost however long it runs. False when the run is over, or when `attempt` (the reporting
     * attempt's number) is not the latest: then nothing changes.
     */
    async recordProgress(run: SyncRunDoc, results: ModelCounts, checkpoint: Record<string, unknown> | null | undefined, at: Date, attempt?: number): Promise<boolean> {
      const live = await runs.updateOne({ _id: run._id, status: { $in: LIVE }, ...(attempt === undefined ? {} : { attempt }) }, { $set: { results } }).exec();
      if (live.matchedCount !== 1) return false;
      await slots.updateOne({ _id: run.schedule_id, run_id: run._id }, { $set: { claimed_at: at } }).exec();
      if (checkpoint !== undefined) await schedules.updateOne({ _id: run.schedule_id }, { $set: { checkpoint: checkpoint === null ? null : JSON.stringify(checkpoint) } }).exec();
      return true;
    },
    /** Forgets a schedule's checkpoint (a full resync starts from the beginning). */
    clearCheckpoint: (scheduleId: string) => schedules.updateOne({ _id: scheduleId }, { $set: { checkpoint: null } }).exec(),
    getSchedule: readSchedule,
    /**
     * Records a run's outcome and frees its schedule. The status filter keeps a repeated report
     * from changing a finished run in the usual case; only the first report is announced. The
     * end of an attempt that a later one replaced (`attempt` not the latest) changes nothing,
     * and leaves the schedule to the run still going.
     */
    async finish(run: SyncRunDoc, outcome: { status: 'SUCCESS' | 'ERROR'; results: ModelCounts; error: { code: string; message: string } | null }, at: Date, attempt?: number): Promise<boolean> {
      const done = await runs
        .updateOne(
          { _id: run._id, status: { $in: LIVE }, ...(attempt === undefined ? {} : { attempt }) },
          { $set: { status: outcome.status, results: outcome.results, error: outcome.error, finished_at: at, started_at: run.started_at ?? at } },
        )
        .exec();
      if (done.matchedCount === 0 && attempt !== undefined && (await runs.exists({ _id: run._id, status: { $in: LIVE } }))) return false;
      await free({ ...run, ...outcome, finished_at: at });
      return done.modifiedCount === 1;
    },
    free,
  };
}

export type ScheduleRepo = ReturnType<typeof createScheduleRepo>;
