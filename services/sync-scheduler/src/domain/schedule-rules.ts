/** When a schedule runs next, and whether it is due: pure rules, so they are tested without a clock. */

export interface ScheduleState {
  paused: boolean;
  /** The id of the run in flight, if any: a schedule never starts a run while one is in flight. */
  running: string | null;
  next_run_at: Date | null;
}

/** A schedule is due when it is not paused, nothing runs, and its time has come. */
export function isDue(schedule: ScheduleState, now: Date): boolean {
  return !schedule.paused && schedule.running === null && schedule.next_run_at !== null && schedule.next_run_at.getTime() <= now.getTime();
}

/**
 * The run after one that starts now. Counted from now, not from the missed tick, so a scheduler
 * that was down for hours makes one run, not one per missed interval.
 */
export function nextRunAfter(now: Date, intervalMs: number): Date {
  return new Date(now.getTime() + intervalMs);
}
