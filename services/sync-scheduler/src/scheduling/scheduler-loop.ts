import type { Logger } from '@latchkey/logger';
import type { ScheduleDoc } from '../db/schedule-model.js';
import { isDue } from '../domain/schedule-rules.js';
import type { Lease } from './lease.js';

export interface SchedulerLoopDeps {
  logger: Logger;
  lease: Lease;
  due(now: Date, limit: number): Promise<ScheduleDoc[]>;
  /** Claims the schedule and enqueues its run; false when a run is already in flight. */
  startRun(schedule: ScheduleDoc, now: Date): Promise<boolean>;
  tickMs: number;
}

/** Due schedules taken per tick: a backlog drains over a few ticks instead of one burst. */
const BATCH = 500;

/**
 * Every tick: hold (or try to take) the lease; only the holder looks for due schedules and
 * queues their runs. Returns a stop function.
 */
export function startSchedulerLoop(deps: SchedulerLoopDeps): { stop(): Promise<void> } {
  let stopped = false;
  let current: Promise<void> = Promise.resolve();
  let wasLeader = false;

  async function tick(): Promise<void> {
    const leader = await deps.lease.tick().catch((error: unknown) => {
      deps.logger.warn('could not renew the scheduler lease', { error });
      return false;
    });
    if (leader !== wasLeader) deps.logger.info(leader ? 'took the scheduler lease' : 'lost the scheduler lease');
    wasLeader = leader;
    if (!leader || stopped) return;
    const now = new Date();
    for (const schedule of await deps.due(now, BATCH)) {
      if (stopped || !deps.lease.holding()) return;
      if (!isDue(schedule, now)) continue;
      await deps.startRun(schedule, now).catch((error: unknown) => deps.logger.warn('could not queue a sync run', { schedule: schedule._id, error }));
    }
  }

  let busy = false;
  const timer = setInterval(() => {
    // A slow tick (a large backlog) is not stacked upon: the next one starts after it.
    if (busy) return;
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
      await deps.lease.release().catch(() => undefined);
    },
  };
}
