import type { Connection } from 'mongoose';
import { scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { apiKeyModel, type ApiKeyDoc } from './api-key-model.js';

export function createApiKeyRepo(connection: Connection) {
  const model = apiKeyModel(connection);
  const scoped = scopedRepo(model);
  return {
    init: () => model.init(),
    /**
     * The one unscoped read: the key is what names the environment. Matching a keyed digest
     * of a high-entropy secret cannot reach another environment's key by accident.
     */
    findByDigest: (digest: string): Promise<ApiKeyDoc | null> => model.findOne({ digest }).lean<ApiKeyDoc>().exec(),
    insert: (environment: EnvironmentId, doc: Omit<ApiKeyDoc, 'environment_id'>) => scoped.insert(environment, doc),
    list: (environment: EnvironmentId) => scoped.find(environment, {}, { sort: { created_at: 1 } }),
    findById: (environment: EnvironmentId, id: string) => scoped.findOne(environment, { _id: id }),
    deleteById: (environment: EnvironmentId, id: string) => scoped.deleteOne(environment, { _id: id }),
    /** Coarse: called by the last-used tracker at most once a minute per key and replica. */
    async touchLastUsed(id: string, at: Date): Promise<void> {
      await model.updateOne({ _id: id, $or: [{ last_used_at: null }, { last_used_at: { $lt: at } }] }, { $set: { last_used_at: at } }).exec();
    },
  };
}

export type ApiKeyRepo = ReturnType<typeof createApiKeyRepo>;
