import type { Connection } from 'mongoose';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { connectSessionModel, connectSessionSlotModel, type ConnectSessionDoc } from './connect-session-model.js';

export function createConnectSessionRepo(connection: Connection) {
  const model = connectSessionModel(connection);
  const slots = connectSessionSlotModel(connection);
  const scoped = scopedRepo(model);
  return {
    init: async () => {
      await Promise.all([model.init(), slots.init()]);
    },
    insert: (environment: EnvironmentId, doc: Omit<ConnectSessionDoc, 'environment_id'>) => scoped.insert(environment, doc),
    /** The one unscoped read: the session token is what names the environment. */
    findByDigest: (digest: string) => model.findOne({ digest }).lean<ConnectSessionDoc>().exec(),
    /** Its slots stay until the sweep: they hold nothing but a count, and the session is gone. */
    removeByDigest: async (digest: string) => (await model.deleteOne({ digest }).exec()).deletedCount > 0,
    /**
     * Counts one more connection made by the session, unless it has made `max` already (false
     * then): takes the first of its `max` numbered slots no other flow took, by inserting it (see
     * `ConnectSessionSlotDoc`). Concurrent flows of one session each get a different slot, or none.
     */
    async countConnection(session: Pick<ConnectSessionDoc, 'digest' | 'expires_at'>, max: number): Promise<boolean> {
      for (let n = 1; n <= max; n++) {
        try {
          await slots.create({ _id: `${session.digest}:${n}`, expires_at: session.expires_at });
          return true;
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
        }
      }
      return false;
    },
    /**
     * Sessions past their expiry, which nothing else would delete (one never used again), across
     * environments, and their slots. Returns how many sessions it deleted.
     */
    async removeExpired(now: Date): Promise<number> {
      const removed = (await model.deleteMany({ expires_at: { $lt: now } }).exec()).deletedCount;
      await slots.deleteMany({ expires_at: { $lt: now } }).exec();
      return removed;
    },
  };
}

export type ConnectSessionRepo = ReturnType<typeof createConnectSessionRepo>;
