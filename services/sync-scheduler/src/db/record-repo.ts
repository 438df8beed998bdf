import type { Connection, QueryFilter, mongo } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import type { RecordAction } from '@latchkey/contracts';
import { recordKey, recordModel, recordSequenceModel, type RecordDoc } from './record-model.js';

/** The records of one connection's model in one variant. */
export interface RecordScope {
  environment: EnvironmentId;
  connection: number;
  model: string;
  variant: string;
}

export type RecordWrite = Omit<RecordDoc, '_id' | 'environment_id' | 'connection' | 'model' | 'variant'>;

export interface PageQuery {
  afterSeq?: number;
  modifiedAfter?: Date;
  actions?: readonly RecordAction[];
  ids?: readonly string[];
  limit: number;
}

/** Lookups a re-sync makes at once; the driver's pool (100 by default) keeps room for others. */
const LOOKUPS_IN_FLIGHT = 50;

/**
 * The filters of the write path's lookups, shared with the explain test so it checks the very
 * queries the repository sends: each is an `_id` equality, answered from an index on MongoDB
 * and on FerretDB's SQLite and PostgreSQL backends alike.
 */
export const recordQueries = {
  /** A record, by its scope and own id. */
  byId: (scope: RecordScope, externalId: string) => ({ _id: recordKey(scope.environment, scope.connection, scope.model, scope.variant, externalId) }),
  /** A scope's sequence counter. */
  sequence: (scope: RecordScope) => ({ _id: JSON.stringify([scope.environment, scope.connection, scope.model, scope.variant]) }),
};

export function createRecordRepo(mongo: Connection) {
  const records = recordModel(mongo);
  const sequences = recordSequenceModel(mongo);
  const inScope = (scope: RecordScope): QueryFilter<RecordDoc> => ({
    environment_id: scope.environment,
    connection: scope.connection,
    model: scope.model,
    variant: scope.variant,
  });
  const keyOf = (scope: RecordScope, externalId: string) => recordKey(scope.environment, scope.connection, scope.model, scope.variant, externalId);

  /** Writes in order, so a reader that sees a sequence number sees every lower one of the batch. */
  async function upsertMany(scope: RecordScope, writes: readonly RecordWrite[]): Promise<void> {
    if (writes.length === 0) return;
    await records.bulkWrite(
      writes.map((write) => ({
        updateOne: {
          filter: recordQueries.byId(scope, write.external_id),
          update: { $set: { ...inScope(scope), ...write } },
          upsert: true,
        },
      })),
      { ordered: true },
    );
  }

  async function insertUntilStored(scope: RecordScope, writes: readonly RecordWrite[]): Promise<number> {
    if (writes.length === 0) return 0;
    try {
      const documents = writes.map(
        (write): RecordDoc => ({
          _id: keyOf(scope, write.external_id),
          environment_id: scope.environment,
          connection: scope.connection,
          model: scope.model,
          variant: scope.variant,
          ...write,
        }),
      );
      await (records.collection as unknown as mongo.Collection<RecordDoc>).insertMany(documents, { ordered: true });
      return writes.length;
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      // An ordered insert stops at the duplicate: what came before it is stored.
      return (error as { insertedCount?: number }).insertedCount ?? 0;
    }
  }

  return {
    init: async () => {
      await records.init();
      await sequences.init();
    },
    /**
     * By scope and record id, one `{_id}` lookup each (the key is built from both): the one
     * filter every backend answers from an index, MongoDB from `_id`'s, FerretDB in SQL on the
     * index our launcher adds; so a re-sync's lookup costs the same whatever the scope holds. A
     * list (`$in`) or the scope's fields would make FerretDB read the whole collection.
     */
    async findByIds(scope: RecordScope, ids: readonly string[]): Promise<RecordDoc[]> {
      const found: RecordDoc[] = [];
      for (let at = 0; at < ids.length; at += LOOKUPS_IN_FLIGHT) {
        const docs = await Promise.all(
          ids.slice(at, at + LOOKUPS_IN_FLIGHT).map((id) => records.findOne(recordQueries.byId(scope, id)).lean<RecordDoc>().exec()),
        );
        for (const doc of docs) if (doc) found.push(doc);
      }
      return found;
    },
    /** Reserves `count` sequence numbers and returns the first; one atomic increment. */
    async reserve(scope: RecordScope, count: number): Promise<number> {
      for (let attempt = 0; ; attempt++) {
        try {
          const doc = await sequences
            .findOneAndUpdate(recordQueries.sequence(scope), { $inc: { seq: count } }, { upsert: true, returnDocument: 'after' })
            .lean()
            .exec();
          return doc!.seq - count + 1;
        } catch (error) {
          // Two first writers of a scope both upserted: one lost, and now the document exists.
          if (attempt > 0 || !isDuplicateKey(error)) throw error;
        }
      }
    },
    /**
     * Inserts in order and stops at the first record already stored; returns how many went in
     * (all of them, or those before it). One insert costs far less than an upsert each, and the
     * documents are complete, so they go to the driver as they are.
     */
    insertUntilStored,
    /**
     * Records not stored yet, in one ordered insert. Should another writer have stored one
     * meanwhile, the rest of the batch is written as upserts, which leave the same result.
     */
    async insertNew(scope: RecordScope, writes: readonly RecordWrite[]): Promise<void> {
      const inserted = await insertUntilStored(scope, writes);
      if (inserted < writes.length) await upsertMany(scope, writes.slice(inserted));
    },
    upsertMany,
    page: (scope: RecordScope, query: PageQuery) => {
      const filter: QueryFilter<RecordDoc> = { ...inScope(scope) };
      if (query.afterSeq !== undefined) filter.seq = { $gt: query.afterSeq };
      if (query.modifiedAfter) filter.last_modified_at = { $gt: query.modifiedAfter };
      if (query.actions) filter.last_action = { $in: [...query.actions] };
      if (query.ids) filter._id = { $in: query.ids.map((id) => keyOf(scope, id)) };
      return records.find(filter).sort({ seq: 1 }).limit(query.limit).lean<RecordDoc[]>().exec();
    },
    /** Drops the payloads of up to `limit` records at or before `untilSeq`; says whether more remain. */
    async prune(scope: RecordScope, untilSeq: number, limit: number, now: Date): Promise<{ count: number; hasMore: boolean }> {
      const found = await records
        .find({ ...inScope(scope), seq: { $lte: untilSeq }, payload: { $ne: null } }, { _id: 1 })
        .sort({ seq: 1 })
        .limit(limit + 1)
        .lean()
        .exec();
      const ids = found.slice(0, limit).map((doc) => doc._id);
      if (ids.length > 0) await records.updateMany({ _id: { $in: ids } }, { $set: { payload: null, pruned_at: now } }).exec();
      return { count: ids.length, hasMore: found.length > limit };
    },
    /** Records present (not deleted) in a scope, for the sync status. */
    count: (scope: RecordScope) => records.countDocuments({ ...inScope(scope), deleted_at: null }).exec(),
    /** A full resync starts from nothing: the scope's records go; its sequence keeps counting, so older cursors stay valid. */
    async clear(scope: RecordScope): Promise<number> {
      const { deletedCount } = await records.deleteMany(inScope(scope)).exec();
      return deletedCount;
    },
    /** A deleted connection takes its records with it. */
    deleteConnection: async (environment: EnvironmentId, connection: number) =>
      (await records.deleteMany({ environment_id: environment, connection }).exec()).deletedCount,
  };
}

export type RecordRepo = ReturnType<typeof createRecordRepo>;
