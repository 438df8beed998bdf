import type { Connection } from 'mongoose';
import { scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { connectSessionModel, type ConnectSessionDoc } from './connect-session-model.js';

export function createConnectSessionRepo(connection: Connection) {
  const model = connectSessionModel(connection);
  const scoped = scopedRepo(model);
  return {
    init: () => model.init(),
    insert: (environment: EnvironmentId, doc: Omit<ConnectSessionDoc, 'environment_id'>) => scoped.insert(environment, doc),
    /** The one unscoped read: the session token is what names the environment. */
    findByDigest: (digest: string) => model.findOne({ digest }).lean<ConnectSessionDoc>().exec(),
    removeByDigest: async (digest: string) => (await model.deleteOne({ digest }).exec()).deletedCount > 0,
    /** Counts one more connection made by the session, unless it has made `max` already (false then). */
    countConnection: async (digest: string, max: number) =>
      (await model.updateOne({ digest, $or: [{ connections_made: { $exists: false } }, { connections_made: { $lt: max } }] }, { $inc: { connections_made: 1 } }).exec()).modifiedCount > 0,
    /** Sessions past their expiry, which nothing else would delete (one never used again), across environments. */
    removeExpired: async (now: Date) => (await model.deleteMany({ expires_at: { $lt: now } }).exec()).deletedCount,
  };
}

export type ConnectSessionRepo = ReturnType<typeof createConnectSessionRepo>;
