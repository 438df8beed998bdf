import { randomBytes } from 'node:crypto';
import type { Connection, QueryFilter } from 'mongoose';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { dataKeyModel, type DataKeyDoc } from './data-key-model.js';

export type NewDataKey = Pick<DataKeyDoc, 'version' | 'wrapped' | 'kek_version'>;

export function createDataKeyRepo(connection: Connection) {
  const model = dataKeyModel(connection);
  const scoped = scopedRepo(model);

  const highest = async (environment: EnvironmentId, filter: QueryFilter<Omit<DataKeyDoc, 'environment_id'>>) =>
    (await scoped.find(environment, filter, { sort: { version: -1 }, limit: 1 }))[0] ?? null;

  return {
    init: () => model.init(),
    /** The key new writes use: the highest version not retired. */
    findActive: (environment: EnvironmentId): Promise<DataKeyDoc | null> => highest(environment, { retired_at: null }),
    /** The highest version, retired or not: a new version is numbered one above it. */
    findLatest: (environment: EnvironmentId): Promise<DataKeyDoc | null> => highest(environment, {}),
    findByVersion: (environment: EnvironmentId, version: number): Promise<DataKeyDoc | null> =>
      scoped.findOne(environment, { version }),
    /**
     * Stores a new version unless another replica stored the same version first (the unique
     * index decides). Returns the stored key either way: only that one may ever seal anything.
     */
    async insert(environment: EnvironmentId, key: NewDataKey): Promise<DataKeyDoc> {
      try {
        return await scoped.insert(environment, { _id: newDataKeyId(), ...key, created_at: new Date(), retired_at: null });
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        const winner = await scoped.findOne(environment, { version: key.version });
        if (!winner) throw error;
        return winner;
      }
    },
    /** Versions below `version` stop taking new writes; they keep decrypting what they sealed. */
    async retireOlderThan(environment: EnvironmentId, version: number, at: Date): Promise<void> {
      // scopedRepo has no updateMany; the environment is in the filter all the same.
      await model.updateMany({ environment_id: environment, version: { $lt: version }, retired_at: null }, { $set: { retired_at: at } }).exec();
    },

    // Rotation is the one caller that spans environments: the KEK is deployment-wide
    // configuration, so re-wrapping under a new one must reach every environment's keys. These
    // functions return and write wrapped keys only, and no request path calls them.

    /** Streams the keys wrapped with one KEK (before retiring a KEK, this must yield nothing). */
    listWrappedWith: (kekVersion: string): AsyncIterable<DataKeyDoc> =>
      model.find({ kek_version: kekVersion }).lean<DataKeyDoc>().cursor(),
    listAll: (): AsyncIterable<DataKeyDoc> => model.find({}).lean<DataKeyDoc>().cursor(),
    /**
     * Replaces the wrap only if it is still the one read (`fromKekVersion`), so two rotations
     * running at once, even with different newest KEKs, never move a key back to an older KEK.
     * Returns whether this call made the change.
     */
    async rewrap(id: string, wrapped: string, kekVersion: string, fromKekVersion: string): Promise<boolean> {
      const result = await model.updateOne({ _id: id, kek_version: fromKekVersion }, { $set: { wrapped, kek_version: kekVersion } }).exec();
      return result.modifiedCount > 0;
    },
  };
}

/** Not a secret: it names the record, the key lives only inside `wrapped`. */
function newDataKeyId(): string {
  return `dk_${randomBytes(12).toString('base64url')}`;
}

export type DataKeyRepo = ReturnType<typeof createDataKeyRepo>;
