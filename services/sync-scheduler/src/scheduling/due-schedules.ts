import type { Logger } from '@latchkey/logger';
import type { ScheduleDoc, ScheduleTiming } from '../db/schedule-model.js';
import { isDue, isOverdue } from '../domain/schedule-rules.js';
import { createDueIndex } from './due-index.js';

export interface DueSchedulesDeps {
  logger: Logger;
  /** Every schedule (the whole collection, read at once), without what only a run reads. */
  all(): Promise<ScheduleTiming[]>;
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

/**
 * `_id` lookups in flight at once: a tick's, re-reading the schedules it takes; and, apart, the
 * reads of announced schedules, all announcements together (the driver's pool holds 100).
 */
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
  function place(doc: ScheduleTiming, now: number): void {
    index.put(doc._id, isOverdue(doc, new Date(now)) ? { ...doc, next_run_at: new Date(now + deps.overdueRetryMs) } : doc);
  }
  /** What a tick hands out: due schedules, and overdue ones whose claim may find their run lost. */
  const wanted = (doc: ScheduleTiming, now: Date) => isDue(doc, now) || isOverdue(doc, now);

  /**
   * Reads `ids` by `_id` into the index; with `now`, returns those due. Every read is made: one
   * that fails puts its schedule back due now, to be read at the next tick (it had left the
   * index when taken), and the first failure is thrown once all are done.
   */
  async function readInto(ids: readonly string[], now?: Date): Promise<ScheduleDoc[]> {
    const due: ScheduleDoc[] = [];
    let failure: { error: unknown } | undefined;
    for (let start = 0; start < ids.length; start += READS) {
      await Promise.all(
        ids.slice(start, start + READS).map(async (id) => {
          const read = ++readCounter;
          let doc: ScheduleDoc | null;
          try {
            doc = await deps.one(id);
          } catch (error) {
            failure ??= { error };
            if (now) index.put(id, { paused: false, running: null, next_run_at: now });
            return;
          }
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
    if (failure) throw failure.error;
    return due;
  }

  /**
   * Ids announced and not read again yet: one queue for every announcement, read `READS` at a
   * time. Each announcement read on its own made 10,000 schedules written at once (10 messages)
   * 320 lookups in flight, and the tick's reads and writes waited behind them for a free
   * connection (3 s per run queued in bench-scale). An id announced again while it waits is
   * read once; one announced while it is being read is read again after.
   */
  const announced = new Set<string>();
  let readers = 0;
  const failures = { count: 0, first: undefined as unknown };
  /** Starts readers of the announced ids, up to `READS`; each reads one id at a time until none is left. */
  function readAnnounced(): void {
    while (readers < READS && announced.size > 0) {
      readers += 1;
      void readNext().finally(() => {
        readers -= 1;
        // One warning per burst; a schedule not read waits for the next full read at most.
        if (readers === 0 && failures.count > 0) {
          deps.logger.warn('could not read changed schedules', { count: failures.count, error: String(failures.first) });
          Object.assign(failures, { count: 0, first: undefined });
        }
      });
    }
  }
  async function readNext(): Promise<void> {
    for (;;) {
      // A full read takes what is announced from here on, and reads it after itself.
      if (heardWhileBuilding) for (const id of announced) heardWhileBuilding.add(id);
      if (heardWhileBuilding || builtAt === null) announced.clear();
      const id = announced.values().next().value;
      if (id === undefined) return;
      announced.delete(id);
      await readInto([id]).catch((error: unknown) => {
        failures.count += 1;
        failures.first ??= error;
      });
    }
  }

  /** Reads every schedule into the index; returns those due at `now`, as just read. */
  async function rebuild(now: Date): Promise<Map<string, ScheduleTiming>> {
    heardWhileBuilding = new Set();
    const due = new Map<string, ScheduleTiming>();
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
    async due(now: Date, limit: number): Promise<ScheduleTiming[]> {
      const fresh = builtAt === null || Date.now() - builtAt >= deps.rescanMs ? await rebuild(now) : new Map<string, ScheduleTiming>();
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
      for (const id of ids) announced.add(id);
      readAnnounced();
    },
    /** Forgets the index (leadership lost or gained, NATS reconnected): the next tick reads every schedule. */
    reset(): void {
      builtAt = null;
      index.clear();
      applied.clear();
      announced.clear();
    },
    get size() {
      return index.size;
    },
  };
}

export type DueSchedules = ReturnType<typeof createDueSchedules>;
