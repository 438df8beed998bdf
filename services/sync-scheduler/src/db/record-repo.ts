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
  const sequenceKey = (scope: RecordScope) => JSON.stringify([scope.environment, scope.connection, scope.model, scope.variant]);

  /** Writes in order, so a reader that sees a sequence number sees every lower one of the batch. */
  async function upsertMany(scope: RecordScope, writes: readonly RecordWrite[]): Promise<void> {
    if (writes.length === 0) return;
    await records.bulkWrite(
      writes.map((write) => ({
        updateOne: {
          filter: { _id: keyOf(scope, write.external_id) },
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
     * By scope and record id: MongoDB answers from the unique index, and FerretDB narrows to the
     * scope's rows first (it answers an `_id` list by scanning the whole collection).
     */
    findByIds: (scope: RecordScope, ids: readonly string[]) =>
      records
        .find({ ...inScope(scope), external_id: { $in: [...ids] } })
        .lean<RecordDoc[]>()
        .exec(),
    /** Reserves `count` sequence numbers and returns the first; one atomic increment. */
    async reserve(scope: RecordScope, count: number): Promise<number> {
      for (let attempt = 0; ; attempt++) {
        try {
          const doc = await sequences
            .findOneAndUpdate({ _id: sequenceKey(scope) }, { $inc: { seq: count } }, { upsert: true, returnDocument: 'after' })
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
