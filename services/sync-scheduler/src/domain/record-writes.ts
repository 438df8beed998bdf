import { createHash } from 'node:crypto';
import { writesOneAtATime, type Holding, type KvLocks } from '@latchkey/bus';
import type { RecordRepo, RecordScope } from '../db/record-repo.js';

export interface RecordWritesOptions {
  /** How long a write waits for the one before it to finish; past it, service_unavailable. */
  waitMs?: number;
}

/**
 * One writer at a time to each scope's records (a connection's model in one variant), across
 * every scheduler replica. A write reserves numbers in the scope's head, logs them, stores the
 * records and then raises the head's `visible`: it is correct only if no other write, clear or
 * prune of the scope runs in between. In one replica the records handler queues a scope's
 * writes; across replicas they met: a sync run handed back or taken over can still have a write
 * in flight while the run resuming it writes, or while a full resync's trigger clears the scope.
 * Such a clear set the log's start past the write's numbers and deleted the log, then the
 * write's entries went in below that start: its records stored, listed by no reader, and found
 * unchanged by every later save. And FerretDB writes an updated head back whole, so two
 * replicas' concurrent reservations could hand out one number twice.
 *
 * Each write, clear and prune holds the scope's key (`records_<hash of the scope>`) in the
 * scheduler's `sync_schedule_locks` bucket, as the schedules' writes do (schedule-writes.ts):
 * one holder, renewed while it writes; a dead holder's key frees itself within the bucket's TTL.
 * Reads take none.
 */
export function serializedRecordWrites(repo: RecordRepo, locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, options: RecordWritesOptions = {}) {
  const alone = writesOneAtATime(locks, 'records', 'Another write to these records is still under way; try again', options.waitMs);
  const keyOf = (scope: RecordScope) =>
    createHash('sha256').update(JSON.stringify([scope.environment, scope.connection, scope.model, scope.variant])).digest('base64url').slice(0, 32);
  return {
    ...repo,
    /**
     * Runs the steps of one write (reserve, insert, update, reveal) as the scope's only writer;
     * `work` checks its holding before each step that writes (a stall can lose the key between them).
     */
    writing: <T>(scope: RecordScope, work: (holding: Holding) => Promise<T>): Promise<T> => alone(keyOf(scope), work),
    clear: (scope: RecordScope) => alone(keyOf(scope), () => repo.clear(scope)),
    prune: (scope: RecordScope, untilSeq: number, limit: number, now: Date) => alone(keyOf(scope), () => repo.prune(scope, untilSeq, limit, now)),
    /**
     * The scope's count, one `_id` lookup; a scope without one kept is counted once as its only
     * writer, and kept from then on (while its writer holds it too long: counted, not kept).
     */
    count: async (scope: RecordScope): Promise<number> =>
      (await repo.keptCount(scope)) ?? alone(keyOf(scope), () => repo.settleCount(scope)).catch(() => repo.count(scope)),
  };
}

export type SerializedRecordRepo = ReturnType<typeof serializedRecordWrites>;
