import type { Connection } from 'mongoose';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { apiKeyDigestModel, apiKeyModel, type ApiKeyDigestDoc, type ApiKeyDoc } from './api-key-model.js';

/** The hot filters, as the repo sends them (the explain test runs these). */
export const apiKeyQueries = {
  digest: (digest: string) => ({ _id: digest }),
  key: (id: string) => ({ _id: id }),
};

export function createApiKeyRepo(connection: Connection) {
  const model = apiKeyModel(connection);
  const digests = apiKeyDigestModel(connection);
  const scoped = scopedRepo(model);
  const pointerOf = (key: Pick<ApiKeyDoc, '_id' | 'digest' | 'environment_id'>): ApiKeyDigestDoc => ({ _id: key.digest, key_id: key._id, environment_id: key.environment_id });
  const writePointer = (pointer: ApiKeyDigestDoc) => digests.replaceOne(apiKeyQueries.digest(pointer._id), pointer, { upsert: true }).exec();

  return {
    init: async () => {
      await Promise.all([model.init(), digests.init()]);
    },
    /**
     * Gives every key its digest entry (keys stored before the entries existed, or whose entry a
     * crash left unwritten). Idempotent: each entry is the same replace, so two replicas starting
     * together write the same documents; a racing upsert's duplicate-key error is that case.
     * One read of each collection at start; returns how many entries it wrote.
     */
    async indexDigests(): Promise<number> {
      // Read whole, then write: FerretDB's SQLite backend holds writes back under an open cursor.
      // Three short strings per key: 100k keys stay a few MB, once at start.
      const keys = await model.find({}, { _id: 1, digest: 1, environment_id: 1 }).lean<ApiKeyDoc[]>().exec();
      const entries = await digests.find({}, { _id: 1, key_id: 1 }).lean<ApiKeyDigestDoc[]>().exec();
      const written = new Map(entries.map((entry) => [entry._id, entry.key_id]));
      let added = 0;
      for (const key of keys) {
        if (written.get(key.digest) === key._id) continue;
        try {
          await writePointer(pointerOf(key));
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
        }
        added += 1;
      }
      return added;
    },
    /**
     * The one unscoped read: the key is what names the environment. Matching a keyed digest
     * of a high-entropy secret cannot reach another environment's key by accident. Two `_id`
     * lookups; an entry left by a deleted key finds nothing.
     */
    async findByDigest(digest: string): Promise<ApiKeyDoc | null> {
      const pointer = await digests.findOne(apiKeyQueries.digest(digest)).lean<ApiKeyDigestDoc>().exec();
      if (!pointer) return null;
      const key = await model.findOne(apiKeyQueries.key(pointer.key_id)).lean<ApiKeyDoc>().exec();
      return key?.digest === digest ? key : null;
    },
    /** The key first (its unique digest index refuses a duplicate), then its digest entry. */
    async insert(environment: EnvironmentId, doc: Omit<ApiKeyDoc, 'environment_id'>) {
      const key = await scoped.insert(environment, doc);
      try {
        await writePointer(pointerOf({ ...doc, environment_id: environment }));
      } catch (error) {
        await scoped.deleteOne(environment, { _id: doc._id }).catch(() => undefined);
        throw error;
      }
      return key;
    },
    list: (environment: EnvironmentId) => scoped.find(environment, {}, { sort: { created_at: 1 } }),
    findById: (environment: EnvironmentId, id: string) => scoped.findOne(environment, { _id: id }),
    /** The key, then its digest entry (an entry left behind finds nothing: see findByDigest). */
    async delete(environment: EnvironmentId, key: Pick<ApiKeyDoc, '_id' | 'digest'>): Promise<void> {
      await scoped.deleteOne(environment, { _id: key._id });
      await digests.deleteOne(apiKeyQueries.digest(key.digest)).exec();
    },
    /**
     * Coarse: called by the last-used tracker at most once a minute per key and replica. An `_id`
     * equality filter (the one FerretDB answers from an index) with `$max`, so that a replica's
     * older time never overwrites a newer one (a condition on `last_used_at` in the filter would
     * make FerretDB read every key).
     */
    async touchLastUsed(id: string, at: Date): Promise<void> {
      await model.updateOne(apiKeyQueries.key(id), { $max: { last_used_at: at } }).exec();
    },
  };
}

export type ApiKeyRepo = ReturnType<typeof createApiKeyRepo>;
