import type { SyncRunDoc } from '../db/schedule-model.js';

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
 * A schedule whose time came while it is shown running: its run outlasts its interval, or the
 * run was lost (its claimer died before queueing it, or its finish report never came). Only a
 * claim tells which: it queues nothing while the run is alive and takes the schedule back from a
 * lost one. The scheduler tries such a claim now and then, never on every tick.
 */
export function isOverdue(schedule: ScheduleState, now: Date): boolean {
  return !schedule.paused && schedule.running !== null && schedule.next_run_at !== null && schedule.next_run_at.getTime() <= now.getTime();
}

/** Whether a run is over: it ended, or was ended for another (a run's end is its first outcome). */
export function runIsOver(run: Pick<SyncRunDoc, 'status'>): boolean {
  return run.status === 'SUCCESS' || run.status === 'ERROR';
}

/** Whether a run was ended by the scheduler rather than by its runner: its schedule was removed, or another run took its place. */
export function isAbandoned(run: Pick<SyncRunDoc, 'error'>): boolean {
  return run.error?.code === 'sync_run_abandoned';
}

/**
 * The run after one that starts now. Counted from now, not from the missed tick, so a scheduler
 * that was down for hours makes one run, not one per missed interval.
 */
export function nextRunAfter(now: Date, intervalMs: number): Date {
  return new Date(now.getTime() + intervalMs);
}
