import type { Logger } from '@latchkey/logger';
import type { ScheduleDoc } from '../db/schedule-model.js';
import { isDue, isOverdue } from '../domain/schedule-rules.js';
import { createDueIndex } from './due-index.js';

export interface DueSchedulesDeps {
  logger: Logger;
  /** Every schedule (the whole collection, read at once). */
  all(): Promise<ScheduleDoc[]>;
  /** One schedule by `_id` (an index lookup on every backend), null once removed. */
  one(id: string): Promise<ScheduleDoc | null>;
  /** How often the whole collection is read again, whatever was heard meanwhile. */
  rescanMs: number;
  /**
   * How often a schedule still shown running past its next run is handed out again for a claim
   * (which takes it back if its run was lost); about the claim's own limit for an unstarted run.
   */
  overdueRetryMs: number;
}

/** `_id` lookups in flight at once, re-reading taken or changed schedules. */
const READS = 32;

/**
 * The lease holder's due schedules. Ticks take them from an in-memory index (see due-index.ts)
 * and read each again by `_id`, so a tick costs the same however many schedules exist; the whole
 * collection is read when the replica starts leading (`reset`), after a NATS reconnection, and
 * every `rescanMs`, and in between `changed` keeps the index in step with the writes every
 * replica announces. A lost announcement delays that schedule until the next full read at most.
 */
export function createDueSchedules(deps: DueSchedulesDeps) {
  const index = createDueIndex();
  let builtAt: number | null = null;
  /** Ids heard while the collection is read: read again once it is in, as they may be newer. */
  let heardWhileBuilding: Set<string> | null = null;
  /** Per schedule, the newest read applied: a slower, older read never overwrites a newer one. */
  let readCounter = 0;
  const applied = new Map<string, number>();

  /** Into the index at its next run; an overdue one (see `isOverdue`) waits `overdueRetryMs` from now. */
  function place(doc: ScheduleDoc, now: number): void {
    index.put(doc._id, isOverdue(doc, new Date(now)) ? { ...doc, next_run_at: new Date(now + deps.overdueRetryMs) } : doc);
  }
  /** What a tick hands out: due schedules, and overdue ones whose claim may find their run lost. */
  const wanted = (doc: ScheduleDoc, now: Date) => isDue(doc, now) || isOverdue(doc, now);

  async function readInto(ids: readonly string[], now?: Date): Promise<ScheduleDoc[]> {
    const due: ScheduleDoc[] = [];
    for (let start = 0; start < ids.length; start += READS) {
      await Promise.all(
        ids.slice(start, start + READS).map(async (id) => {
          const read = ++readCounter;
          const doc = await deps.one(id);
          if ((applied.get(id) ?? 0) > read) return;
          applied.set(id, read);
          if (!doc) {
            index.remove(id);
            applied.delete(id);
            return;
          }
          place(doc, (now ?? new Date()).getTime());
          if (now && wanted(doc, now)) due.push(doc);
        }),
      );
    }
    return due;
  }

  /** Reads every schedule into the index; returns those due at `now`, as just read. */
  async function rebuild(now: Date): Promise<Map<string, ScheduleDoc>> {
    heardWhileBuilding = new Set();
    const due = new Map<string, ScheduleDoc>();
    try {
      const started = readCounter;
      const docs = await deps.all();
      index.clear();
      for (const doc of docs) {
        // A schedule read by `_id` after the whole read began is newer than what the whole read saw.
        if ((applied.get(doc._id) ?? 0) > started) continue;
        place(doc, now.getTime());
        if (wanted(doc, now)) due.set(doc._id, doc);
      }
      builtAt = Date.now();
      const heard = [...heardWhileBuilding];
      heardWhileBuilding = null;
      await readInto(heard);
      for (const id of heard) due.delete(id);
    } finally {
      heardWhileBuilding = null;
    }
    return due;
  }

  return {
    /** The schedules due at `now` (at most `limit`), each read again by `_id`. */
    async due(now: Date, limit: number): Promise<ScheduleDoc[]> {
      const fresh = builtAt === null || Date.now() - builtAt >= deps.rescanMs ? await rebuild(now) : new Map<string, ScheduleDoc>();
      const taken = index.take(now, limit);
      // Just read whole: no need to read again. Put back as read: a claim's announcement moves each to its next run.
      const known = taken.flatMap((id) => (fresh.has(id) ? [fresh.get(id)!] : []));
      for (const doc of known) place(doc, now.getTime());
      return [...known, ...(await readInto(taken.filter((id) => !fresh.has(id)), now))];
    },
    /** Schedules a replica wrote or removed: read again, while this replica holds an index. */
    changed(ids: readonly string[]): void {
      if (heardWhileBuilding) {
        for (const id of ids) heardWhileBuilding.add(id);
        return;
      }
      if (builtAt === null) return;
      readInto(ids).catch((error: unknown) => deps.logger.warn('could not read changed schedules', { error: String(error) }));
    },
    /** Forgets the index (leadership lost or gained, NATS reconnected): the next tick reads every schedule. */
    reset(): void {
      builtAt = null;
      index.clear();
      applied.clear();
    },
    get size() {
      return index.size;
    },
  };
}

export type DueSchedules = ReturnType<typeof createDueSchedules>;
