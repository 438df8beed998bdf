import type { Connection } from 'mongoose';
import type { EnvironmentId } from '@latchkey/mongo';
import { actionRunModel, type ActionRunDoc } from './action-run-model.js';

export function createActionRunRepo(connection: Connection) {
  const model = actionRunModel(connection);
  return {
    init: () => model.init(),
    insert: (doc: ActionRunDoc) => model.create(doc),
    async get(environment: EnvironmentId, id: string): Promise<ActionRunDoc | null> {
      return (await model.findOne({ _id: id, environment_id: environment }).lean().exec()) as ActionRunDoc | null;
    },
    async markRunning(environment: EnvironmentId, id: string, attempts: number): Promise<void> {
      await model.updateOne({ _id: id, environment_id: environment, status: { $in: ['queued', 'running'] } }, { $set: { status: 'running', attempts } }).exec();
    },
    /**
     * Forgets runs finished before `finishedBefore`, and runs never finished that were created
     * before `unfinishedCreatedBefore`: past it, no delivery of their job can still come (no TTL
     * indexes: FerretDB has none).
     */
    async removeExpired(bounds: { finishedBefore: Date; unfinishedCreatedBefore: Date }): Promise<number> {
      const [finished, unfinished] = await Promise.all([
        model.deleteMany({ completed_at: { $ne: null, $lt: bounds.finishedBefore } }).exec(),
        model.deleteMany({ completed_at: null, created_at: { $lt: bounds.unfinishedCreatedBefore } }).exec(),
      ]);
      return finished.deletedCount + unfinished.deletedCount;
    },
    /** Records the outcome once: a run already finished keeps its first outcome (false then). */
    async finish(environment: EnvironmentId, id: string, outcome: Pick<ActionRunDoc, 'status' | 'output_json' | 'error'>): Promise<boolean> {
      const result = await model
        .updateOne({ _id: id, environment_id: environment, status: { $in: ['queued', 'running'] } }, { $set: { ...outcome, completed_at: new Date() } })
        .exec();
      return result.modifiedCount > 0;
    },
  };
}

export type ActionRunRepo = ReturnType<typeof createActionRunRepo>;
