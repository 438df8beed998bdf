import type { Connection } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import { actionRunModel, actionRunOutcomeModel, type ActionRunDoc, type ActionRunOutcomeDoc } from './action-run-model.js';

/** How many expired runs one delete names. */
const SWEEP_BATCH = 500;

/**
 * Async action runs. A run's outcome is decided by an insert (`action_run_outcomes`, keyed by the
 * run's id): the first delivery to store it wins, on FerretDB as on MongoDB, and every reader
 * takes the run's status from it, so a finished run never reads `running` again, whatever a
 * redelivery writes to the run meanwhile.
 */
export function createActionRunRepo(connection: Connection) {
  const model = actionRunModel(connection);
  const outcomes = actionRunOutcomeModel(connection);
  const findOutcome = async (environment: EnvironmentId, id: string) =>
    (await outcomes.findOne({ _id: id, environment_id: environment }).lean().exec()) as ActionRunOutcomeDoc | null;

  return {
    init: () => Promise.all([model.init(), outcomes.init()]),
    insert: (doc: ActionRunDoc) => model.create(doc),
    /** The run, with its stored outcome if it has one (a run an earlier version finished carries its own). */
    async get(environment: EnvironmentId, id: string): Promise<ActionRunDoc | null> {
      const [run, outcome] = await Promise.all([model.findOne({ _id: id, environment_id: environment }).lean().exec() as Promise<ActionRunDoc | null>, findOutcome(environment, id)]);
      if (!run || !outcome) return run;
      return { ...run, status: outcome.status, output_json: outcome.output_json, error: outcome.error, completed_at: outcome.completed_at };
    },
    /**
     * A delivery starts the run. Not once it has an outcome: the run's own status may lag behind
     * it (FerretDB can write back `running` over the copy a finish made), but readers go by the
     * outcome.
     */
    async markRunning(environment: EnvironmentId, id: string, attempts: number): Promise<void> {
      if (await findOutcome(environment, id)) return;
      await model.updateOne({ _id: id, environment_id: environment, status: { $in: ['queued', 'running'] } }, { $set: { status: 'running', attempts } }).exec();
    },
    /**
     * Forgets runs finished before `finishedBefore`, and runs never finished that were created
     * before `unfinishedCreatedBefore`: past it, no delivery of their job can still come (no TTL
     * indexes: FerretDB has none). A run goes before its outcome, so none reads unfinished again.
     */
    async removeExpired(bounds: { finishedBefore: Date; unfinishedCreatedBefore: Date }): Promise<number> {
      let removed = 0;
      const expired = (await outcomes.find({ completed_at: { $lt: bounds.finishedBefore } }, { _id: 1 }).lean().exec()).map((doc) => doc._id);
      for (let at = 0; at < expired.length; at += SWEEP_BATCH) {
        const ids = expired.slice(at, at + SWEEP_BATCH);
        removed += (await model.deleteMany({ _id: { $in: ids } }).exec()).deletedCount;
        await outcomes.deleteMany({ _id: { $in: ids } }).exec();
      }
      const [finished, unfinished] = await Promise.all([
        model.deleteMany({ completed_at: { $ne: null, $lt: bounds.finishedBefore } }).exec(),
        model.deleteMany({ completed_at: null, created_at: { $lt: bounds.unfinishedCreatedBefore } }).exec(),
      ]);
      return removed + finished.deletedCount + unfinished.deletedCount;
    },
    /**
     * Records the outcome once: the first to insert it wins; a run already finished keeps its
     * first outcome (false then, and the caller reads that one back with `get`).
     */
    async finish(environment: EnvironmentId, id: string, outcome: Pick<ActionRunDoc, 'status' | 'output_json' | 'error'>): Promise<boolean> {
      const run = (await model.findOne({ _id: id, environment_id: environment }).lean().exec()) as ActionRunDoc | null;
      // Gone, or finished by an earlier version, which kept the outcome on the run only.
      if (!run || (run.status !== 'queued' && run.status !== 'running')) return false;
      if (outcome.status !== 'done' && outcome.status !== 'failed') throw new Error(`an outcome is done or failed, not ${outcome.status}`);
      const completedAt = new Date();
      try {
        await outcomes.create({ _id: id, environment_id: environment, status: outcome.status, output_json: outcome.output_json, error: outcome.error, completed_at: completedAt });
      } catch (error) {
        if (isDuplicateKey(error)) return false;
        throw error;
      }
      // The run's copy (for the sweep and earlier versions): a plain write, the outcome being decided.
      await model.updateOne({ _id: id, environment_id: environment }, { $set: { ...outcome, completed_at: completedAt } }).exec();
      return true;
    },
  };
}

export type ActionRunRepo = ReturnType<typeof createActionRunRepo>;
