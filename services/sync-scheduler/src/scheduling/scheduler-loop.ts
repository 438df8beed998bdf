import type { SchedulerTick } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';
import type { ScheduleTiming } from '../db/schedule-model.js';
import { isDue, isOverdue } from '../domain/schedule-rules.js';
import type { Lease } from './lease.js';

export interface SchedulerLoopDeps {
  logger: Logger;
  lease: Lease;
  due(now: Date, limit: number): Promise<ScheduleTiming[]>;
  /** Claims the schedule and enqueues its run; false when a run is already in flight. */
  startRun(schedule: ScheduleTiming, now: Date): Promise<boolean>;
  tickMs: number;
  /** Told when this replica starts or stops leading (the due index starts over). */
  onLeadership?(leading: boolean): void;
}

/** Due schedules taken per tick: a backlog drains over a few ticks instead of one burst. */
const BATCH = 500;

const msSince = (startedAt: bigint) => Math.round(Number(process.hrtime.bigint() - startedAt) / 1e4) / 100;

/**
 * Every tick: hold (or try to take) the lease; only the holder looks for due schedules and
 * queues their runs. What a tick did (its duration, the due query's, schedules read and runs
 * queued) goes into the lease at the next renewal, where `GET /admin/sync-scheduler` reads it.
 * Returns a stop function.
 */
export function startSchedulerLoop(deps: SchedulerLoopDeps): { stop(): Promise<void> } {
  let stopped = false;
  let current: Promise<void> = Promise.resolve();
  let wasLeader = false;
  let lastTick: SchedulerTick | null = null;

  /**
   * Renews (or tries to take) the lease, one renewal at a time: two at once would race on the
   * lease's revision, and the loser would give up a lease this replica holds.
   */
  let renewal: Promise<boolean> = Promise.resolve(false);
  let renewing = false;
  function renew(): Promise<boolean> {
    renewing = true;
    renewal = renewal.then(() =>
      deps.lease
        .tick(lastTick)
        .catch((error: unknown) => {
          deps.logger.warn('could not renew the scheduler lease', { error });
          return false;
        })
        .finally(() => {
          renewing = false;
        }),
    );
    return renewal;
  }

  async function tick(): Promise<void> {
    const leader = await renew();
    if (leader !== wasLeader) {
      deps.logger.info(leader ? 'took the scheduler lease' : 'lost the scheduler lease');
      deps.onLeadership?.(leader);
    }
    wasLeader = leader;
    if (!leader || stopped) return;
    const now = new Date();
    const startedAt = process.hrtime.bigint();
    const due = await deps.due(now, BATCH);
    const stats: SchedulerTick = { at: now.toISOString(), duration_ms: 0, due_query_ms: msSince(startedAt), read: due.length, queued: 0 };
    try {
      for (const schedule of due) {
        if (stopped || !deps.lease.holding()) return;
        // An overdue schedule is claimed too: the claim frees it from a run that was lost.
        if (!isDue(schedule, now) && !isOverdue(schedule, now)) continue;
        const queued = await deps.startRun(schedule, now).catch((error: unknown) => {
          deps.logger.warn('could not queue a sync run', { schedule: schedule._id, error });
          return false;
        });
        if (queued) stats.queued += 1;
      }
    } finally {
      stats.duration_ms = msSince(startedAt);
      lastTick = stats;
    }
  }

  let busy = false;
  const timer = setInterval(() => {
    // A slow tick (a large backlog) is not stacked upon: the next one starts after it. Meanwhile
    // its lease is renewed as between ticks: a full read of the schedules or a backlog can
    // outlast it, and another replica would take it and schedule beside this one. A renewal that
    // fails ends the holding at once (`holding()`), which the tick checks before each run.
    if (busy) {
      if (wasLeader && !renewing) void renew();
      return;
    }
    busy = true;
    current = tick()
      .catch((error: unknown) => {
        deps.logger.warn('scheduler tick failed', { error });
      })
      .finally(() => {
        busy = false;
      });
  }, deps.tickMs);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await current.catch(() => undefined);
      // A renewal still in flight would take the lease again after its release.
      await renewal.catch(() => undefined);
      await deps.lease.release().catch(() => undefined);
    },
  };
}
