import { Schema, type Connection } from 'mongoose';

/**
 * A lifecycle function that ran to its end for one event, `<event>:<environment>:<connection
 * id>:<stream sequence>:<function>`, or a sync's `onWebhook` for one inbound webhook,
 * `webhook:<environment>:<inbound id>:<sync>`: when the event comes again (an outage of ours
 * failed another function of it), the functions that ran are not run twice. Kept two days,
 * longer than an event is redelivered.
 */
interface LifecycleRunDoc {
  _id: string;
  done_at: Date;
}

const lifecycleRunSchema = new Schema<LifecycleRunDoc>(
  {
    _id: { type: String, required: true },
    done_at: { type: Date, required: true },
  },
  { collection: 'lifecycle_runs', versionKey: false },
);
lifecycleRunSchema.index({ done_at: 1 });

export function createLifecycleRunRepo(connection: Connection) {
  const model = connection.model<LifecycleRunDoc>('LifecycleRun', lifecycleRunSchema);
  return {
    init: () => model.init(),
    isDone: async (key: string): Promise<boolean> => (await model.exists({ _id: key }).exec()) !== null,
    async markDone(key: string): Promise<void> {
      await model.updateOne({ _id: key }, { $setOnInsert: { done_at: new Date() } }, { upsert: true }).exec();
    },
    /** Forgets what ran before `before` (no TTL indexes: FerretDB has none). */
    async removeBefore(before: Date): Promise<number> {
      return (await model.deleteMany({ done_at: { $lt: before } }).exec()).deletedCount;
    },
  };
}

export type LifecycleRunRepo = ReturnType<typeof createLifecycleRunRepo>;
