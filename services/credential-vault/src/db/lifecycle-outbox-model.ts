import { Schema, type Connection } from 'mongoose';

/**
 * A lifecycle fact (`connection.created`, `connection.deleted`, `integration.removed`…) kept
 * from just before the write it announces until JetStream has stored it. A replica that dies, or
 * loses NATS, between the two leaves it here, and any replica's sweep publishes it later:
 * schedules, post-creation functions, record deletions and the end of an integration's deployed
 * functions have no other trigger. No credentials: the payloads identify connections and
 * integrations only.
 */
export interface LifecycleOutboxDoc {
  /** The fact's JetStream `msgId` too: a resend within the duplicate window is stored once. */
  _id: string;
  environment_id: string;
  /** The connection's `_id`, for a connection's fact. */
  connection?: string | null;
  /**
   * The integration's `_id`, for an integration's fact: its key's end, which happened once the
   * integration is gone or holds another key (a rename).
   */
  integration?: string | null;
  /** The fact stands once the write happened: the connection exists (created), or is gone (deleted). */
  holds_when: 'present' | 'absent';
  /**
   * For a write to a connection that existed before (a reconnect's new credentials): it happened
   * once the credentials version is above this one, the version the writer read.
   */
  credentials_version_above?: number | null;
  /** The contract's subject; the vault publishes only its lifecycle contracts from here. */
  subject: string;
  payload: Record<string, unknown>;
  at: Date;
}

const lifecycleOutboxSchema = new Schema<LifecycleOutboxDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: String, default: null },
    integration: { type: String, default: null },
    holds_when: { type: String, enum: ['present', 'absent'], required: true },
    credentials_version_above: { type: Number, default: null },
    subject: { type: String, required: true },
    payload: { type: Schema.Types.Mixed, required: true },
    at: { type: Date, required: true },
  },
  { collection: 'lifecycle_outbox', versionKey: false, minimize: false },
);
lifecycleOutboxSchema.index({ at: 1 });

export const lifecycleOutboxModel = (connection: Connection) => connection.model<LifecycleOutboxDoc>('LifecycleOutbox', lifecycleOutboxSchema);

/**
 * Written and deleted by `_id`. The sweep reads the oldest entries: the collection holds only
 * facts in flight (empty but for an outage), so that read stays small on either backend.
 */
export function createLifecycleOutboxRepo(connection: Connection) {
  const model = lifecycleOutboxModel(connection);
  return {
    init: () => model.init(),
    keep: async (docs: LifecycleOutboxDoc[]): Promise<void> => {
      await model.insertMany(docs);
    },
    drop: async (ids: string[]): Promise<void> => {
      await model.deleteMany({ _id: { $in: ids } }).exec();
    },
    /** Entries kept before `before`, oldest first. */
    olderThan: (before: Date, limit: number) => model.find({ at: { $lt: before } }).sort({ at: 1 }).limit(limit).lean<LifecycleOutboxDoc[]>().exec(),
  };
}

export type LifecycleOutboxRepo = ReturnType<typeof createLifecycleOutboxRepo>;
