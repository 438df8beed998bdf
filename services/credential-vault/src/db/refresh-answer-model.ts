import { Schema, type Connection } from 'mongoose';

/**
 * A provider's answer to a refresh, kept from the moment it arrives until the connection has
 * stored it. The provider may have rotated the refresh token, and the answer is then the only
 * copy of the new one: should the replica holding it die before its write to the connection
 * (which waits for the connection's write key), the next holder of the refresh lock stores this
 * answer instead of presenting the spent token. One per connection (`_id` is the connection's).
 */
export interface RefreshAnswerDoc {
  /** The connection's `_id`. */
  _id: string;
  environment_id: string;
  /** The credentials version the answer replaces: it is stored only while the connection still holds it. */
  read_version: number;
  /** The new credentials, sealed as the connection stores them (the same data key, bound to the connection). */
  credentials: string;
  expires_at: Date | null;
  at: Date;
}

const refreshAnswerSchema = new Schema<RefreshAnswerDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    read_version: { type: Number, required: true },
    credentials: { type: String, required: true },
    expires_at: { type: Date, default: null },
    at: { type: Date, required: true },
  },
  { collection: 'refresh_answers', versionKey: false },
);

export const refreshAnswerModel = (connection: Connection) => connection.model<RefreshAnswerDoc>('RefreshAnswer', refreshAnswerSchema);

/** Every call is by `_id` alone: no scan on either backend. */
export function createRefreshAnswerRepo(connection: Connection) {
  const model = refreshAnswerModel(connection);
  return {
    init: () => model.init(),
    /** One write, before anything else is done with the answer. */
    keep: async (doc: RefreshAnswerDoc): Promise<void> => {
      await model.replaceOne({ _id: doc._id }, doc, { upsert: true }).exec();
    },
    find: (connection: string) => model.findOne({ _id: connection }).lean<RefreshAnswerDoc>().exec(),
    /**
     * Only the answer that replaced `readVersion`, when given: a newer one another holder kept
     * stays. Without it, whatever the connection's (it is being deleted).
     */
    forget: async (connection: string, readVersion?: number): Promise<void> => {
      await model.deleteOne({ _id: connection, ...(readVersion === undefined ? {} : { read_version: readVersion }) }).exec();
    },
  };
}

export type RefreshAnswerRepo = ReturnType<typeof createRefreshAnswerRepo>;
