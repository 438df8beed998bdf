import type { Logger } from '@latchkey/logger';
import type { ScheduleDoc } from '../db/schedule-model.js';
import { isDue, type ScheduleState } from '../domain/schedule-rules.js';
import { createDueIndex } from './due-index.js';

export interface DueSchedulesDeps {
  logger: Logger;
  /** Every schedule's due state (the whole collection, read at once). */
  all(): Promise<Array<ScheduleState & { _id: string }>>;
  /** One schedule by `_id` (an index lookup on every backend), null once removed. */
  one(id: string): Promise<ScheduleDoc | null>;
  /** How often the whole collection is read again, whatever was heard meanwhile. */
  rescanMs: number;
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
          index.put(id, doc);
          if (now && isDue(doc, now)) due.push(doc);
        }),
      );
    }
    return due;
  }

  async function rebuild(): Promise<void> {
    heardWhileBuilding = new Set();
    try {
      const started = readCounter;
      const states = await deps.all();
      index.clear();
      for (const state of states) {
        // A schedule read by `_id` after the whole read began is newer than what the whole read saw.
        if ((applied.get(state._id) ?? 0) > started) continue;
        index.put(state._id, state);
      }
      builtAt = Date.now();
      const heard = [...heardWhileBuilding];
      heardWhileBuilding = null;
      await readInto(heard);
    } finally {
      heardWhileBuilding = null;
    }
  }

  return {
    /** The schedules due at `now` (at most `limit`), each read again by `_id`. */
    async due(now: Date, limit: number): Promise<ScheduleDoc[]> {
      if (builtAt === null || Date.now() - builtAt >= deps.rescanMs) await rebuild();
      const taken = index.take(now, limit);
      // Put back as read: a claim's own announcement moves each to its next run.
      return readInto(taken, now);
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
