import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import type { WebhookDelivery } from '@latchkey/contracts';
import type { EnvironmentId } from '@latchkey/mongo';
import { createGroupCommit } from './group-commit.js';
import { insertTaken } from './insert-new.js';
import {
  MARK_WINDOW_MS,
  PARKED_COUNTS,
  markCollectionName,
  markWindowOf,
  parkedCollectionName,
  parkedDueBy,
  tallyId,
  type ParkMarkDoc,
  type ParkedCountDoc,
  type ParkedDeliveryDoc,
} from './parked-delivery-model.js';

/** One delivery to keep until `dueAt`, under the id of its wait (`parkedDeliveryId`). */
export interface ParkRequest {
  id: string;
  dueAt: Date;
  /** The message that brings it back. */
  job: WebhookDelivery;
}

/** MongoDB's code for a collection that is not there (a drop another replica made first). */
const NAMESPACE_NOT_FOUND = 26;

/**
 * The parked deliveries (see `parked-delivery-model.ts`), shared by every replica. Parking is an
 * insert of the delivery in the collection of its slot, then of its wait's mark (a burst of
 * parkings is one insert of each per collection); a wait parked again into the same slot is
 * stored once. Every read is by `_id`, or of a whole collection whose deliveries are all due.
 */
export function createParkedDeliveryRepo(connection: Connection, options: { slotMs: number }) {
  const { slotMs } = options;
  // How long a collection is kept, empty, after its time, for a replica whose clock is behind to
  // park there and be seen: a minute, or eight slots when they are short (each poll reads it).
  const dropAfterMs = Math.min(60_000, 8 * slotMs);
  const database = () => {
    if (!connection.db) throw new Error('the database connection is not open');
    return connection.db;
  };
  const dueBy = (by: number) => database().collection<ParkedDeliveryDoc>(parkedCollectionName(by));
  const marks = (window: number) => database().collection<ParkMarkDoc>(markCollectionName(window));
  const counts = () => database().collection<ParkedCountDoc>(PARKED_COUNTS);
  const windowOf = (at: Date) => Math.floor(at.getTime() / MARK_WINDOW_MS);
  // Each replica keeps its own tally of each collection, one document (`<by>:<replica>`) only it
  // writes, one write at a time, with the total it holds: replicas adding to one document with
  // `$inc` lost each other's changes on FerretDB, which applies an update by reading and writing
  // back the document. A replica's tally may go below zero (it returned what another parked);
  // the sum over the replicas is the count. A new process is a new replica.
  const replica = randomBytes(6).toString('hex');
  const tallies = new Map<number, number>();
  let tallying: Promise<unknown> = Promise.resolve();
  /** Adds `change` to this replica's tally of the collection due by `by`: for the metrics only, so a failed write is let go (the next one writes the total). */
  const tally = (by: number, change: number): Promise<unknown> => {
    if (change === 0) return Promise.resolve();
    tallies.set(by, (tallies.get(by) ?? 0) + change);
    tallying = tallying
      .then(() => counts().updateOne({ _id: tallyId(by, replica) }, { $set: { by, n: tallies.get(by) ?? 0 } }, { upsert: true }))
      .catch(() => undefined);
    return tallying;
  };
  /** The end of the slot `at` falls in: when a delivery due at `at` is returned, at the latest. */
  const slotEnd = (at: Date) => (Math.floor(at.getTime() / slotMs) + 1) * slotMs;

  // The delivery first, then its mark: a mark says the delivery is stored.
  async function parkAll(requests: Array<ParkRequest & { environment: EnvironmentId }>): Promise<void> {
    const bySlot = new Map<number, ParkedDeliveryDoc[]>();
    for (const request of requests) {
      const by = slotEnd(request.dueAt);
      bySlot.set(by, [...(bySlot.get(by) ?? []), { _id: request.id, environment_id: request.environment, due_at: request.dueAt, job: request.job }]);
    }
    const stored = await Promise.all([...bySlot].map(async ([by, docs]) => [by, docs.length - (await insertTaken(dueBy(by), docs)).length] as const));
    const now = new Date();
    await insertTaken(
      marks(windowOf(now)),
      requests.map((request) => ({ _id: request.id, environment_id: request.environment, parked_at: now })),
    );
    await Promise.all(stored.map(([by, count]) => tally(by, count)));
  }
  const writes = createGroupCommit(parkAll);

  async function dropIfThere(name: string): Promise<boolean> {
    try {
      return await database().collection(name).drop();
    } catch (error) {
      if ((error as { code?: unknown }).code === NAMESPACE_NOT_FOUND) return false;
      throw error;
    }
  }

  return {
    /** Keeps a delivery until `dueAt` (returned at most a slot later); resolves once stored. */
    park: (environment: EnvironmentId, request: ParkRequest): Promise<void> => writes.add({ ...request, environment }),
    /** Whether this wait was parked in the last hour or more (`MARK_WINDOW_MS`): by `_id`, in this window's marks and the last's. */
    async wasParked(id: string, now = new Date()): Promise<boolean> {
      const window = windowOf(now);
      const found = await Promise.all([window, window - 1].map((at) => marks(at).findOne({ _id: id })));
      return found.some((mark) => mark !== null);
    },
    /**
     * How many deliveries are parked, due or not, from the replicas' tallies: one read of a
     * document per replica and collection, never of the deliveries. The tallies of collections
     * dropped are left out (a return counted after the drop).
     */
    async countParked(): Promise<number> {
      const [collections, tallyDocs] = await Promise.all([database().listCollections({}, { nameOnly: true }).toArray(), counts().find({}).toArray()]);
      const parked = new Map<number, number>();
      for (const { name } of collections) {
        const by = parkedDueBy(name);
        if (by !== undefined) parked.set(by, 0);
      }
      for (const doc of tallyDocs) {
        // A count an earlier version kept, `_id` its collection's time, is one more tally.
        const by = typeof doc._id === 'number' ? doc._id : doc.by;
        if (by !== undefined && parked.has(by)) parked.set(by, parked.get(by)! + doc.n);
      }
      return [...parked.values()].reduce((sum, n) => sum + Math.max(0, n), 0);
    },
    /** The times of the collections whose deliveries are all due at `now`, oldest first. */
    async dueCollections(now: Date): Promise<number[]> {
      const collections = await database().listCollections({}, { nameOnly: true }).toArray();
      return collections
        .map(({ name }) => parkedDueBy(name))
        .filter((by): by is number => by !== undefined && by <= now.getTime())
        .sort((a, b) => a - b);
    },
    /** The deliveries of the collection due by `by`, `batchSize` at a time, in one read of it. */
    async *deliveriesDueBy(by: number, batchSize: number): AsyncGenerator<ParkedDeliveryDoc[]> {
      let batch: ParkedDeliveryDoc[] = [];
      for await (const doc of dueBy(by).find({}, { batchSize })) {
        batch.push(doc);
        if (batch.length >= batchSize) {
          yield batch;
          batch = [];
        }
      }
      if (batch.length > 0) yield batch;
    },
    /** Ends the waits whose deliveries are back on JOBS (their marks stay, for their window): one delete by `_id` each. */
    async release(by: number, ids: readonly string[]): Promise<void> {
      const deleted = await Promise.all(ids.map((id) => dueBy(by).deleteOne({ _id: id })));
      await tally(by, -deleted.reduce((sum, { deletedCount }) => sum + deletedCount, 0));
    },
    /** Drops the collection due by `by` once it is empty and a while past its time, and its count; answers whether it did. */
    async dropIfDone(by: number, now: Date): Promise<boolean> {
      if (now.getTime() < by + dropAfterMs) return false;
      if ((await dueBy(by).findOne({})) !== null) return false;
      const dropped = await dropIfThere(parkedCollectionName(by));
      // This replica's tally (and an earlier version's count); the others' go with the marks' sweep.
      tallies.delete(by);
      await Promise.all([counts().deleteOne({ _id: tallyId(by, replica) }), counts().deleteOne({ _id: by })]);
      return dropped;
    },
    /**
     * Drops the marks no one looks for any more (windows two or more behind), and every replica's
     * tallies of collections long dropped; answers how many collections of marks.
     */
    async sweepMarks(now = new Date()): Promise<number> {
      const current = windowOf(now);
      let dropped = 0;
      const collections = await database().listCollections({}, { nameOnly: true }).toArray();
      for (const { name } of collections) {
        const window = markWindowOf(name);
        if (window !== undefined && window < current - 1 && (await dropIfThere(name))) dropped++;
      }
      const parked = new Set(collections.map(({ name }) => parkedDueBy(name)));
      for (const { _id, by = _id } of await counts().find({}).toArray()) {
        if (typeof by !== 'number' || parked.has(by) || by + dropAfterMs >= now.getTime()) continue;
        tallies.delete(by);
        await counts().deleteOne({ _id });
      }
      return dropped;
    },
  };
}

export type ParkedDeliveryRepo = ReturnType<typeof createParkedDeliveryRepo>;
