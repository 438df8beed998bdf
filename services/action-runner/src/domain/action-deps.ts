import type { Bus, OperationLog } from '@latchkey/bus';
import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import type { ActionRunRepo } from '../db/action-run-repo.js';
import type { KnownConnections } from './known-connections.js';
import type { Runner } from './run-function.js';

/** What the action handlers are given by the wiring (start-runner.ts). */
export interface ActionDeps {
  bus: Bus;
  logger: Logger;
  runner: Runner;
  runs: ActionRunRepo;
  connections: KnownConnections;
  /** How long a served output stream waits for the gateway to read it. */
  streamIdleMs: number;
  /** The operations log: one `action_run` per run (async runs when they end). */
  operations: Pick<OperationLog, 'record'>;
  /**
   * Aborted when this replica is stopping and the runs a caller waits for (synchronous actions,
   * dry runs, pre-deletion functions) must end: see `untilStopped`.
   */
  stopping: AbortSignal;
}

/**
 * An outage of ours (the bus, a service, a database away), after which a run is tried again
 * (an async action, a lifecycle function). A provider's failure (`upstream_timeout`,
 * `upstream_unreachable`: retryable for a caller who chooses to) is the run's outcome: the
 * provider may have done what was asked, and a function is not known to be safe to run twice
 * (a proxy call is not retried unless asked).
 */
export const isOurOutage = (error: AppError) => error.retryable && !error.code.startsWith('upstream_');

/**
 * How long a run its caller waits for (a synchronous action, a dry run) may wait for a free
 * slot: the gateway waits 10 s past the run's own limit (`action-call.ts`), so a run that
 * started later could end after its caller was answered 503, and run unasked.
 */
export const SYNC_RUN_SLOT_WAIT_MS = 5_000;

/**
 * Runs work a caller waits for (its run given `stopping` as its signal): should the replica
 * stop first, the run is cut off and the caller answered 503 `service_unavailable` while NATS
 * still carries the answer, instead of the process being cut off at its deadline with the caller
 * left to time out. What the function did before it was stopped (an upstream call) stays done,
 * as after a crash: the caller may try again where that is safe.
 */
export async function untilStopped<T>(stopping: AbortSignal, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (stopping.aborted) throw new AppError('service_unavailable', 'The replica running this function stopped before it finished; it may have done part of its work');
    throw error;
  }
}
