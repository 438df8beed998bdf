import type { AppError } from '@latchkey/errors';
import { databaseUnavailable } from '@latchkey/mongo';

/**
 * The gateway's own database unreachable, as the coded error every caller gets: 503
 * service_unavailable (retryable) within MONGODB_SERVER_SELECTION_TIMEOUT_MS, never a 500 at the
 * request deadline. Used where errors leave the gateway: the HTTP error path and its NATS handlers.
 */
export function fromDatabase(error: unknown): AppError | undefined {
  return databaseUnavailable(error, 'The gateway');
}

/** A NATS handler whose database failures leave as service_unavailable. */
export function answeringUnavailable<A extends unknown[], R>(handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return (...args) =>
    handler(...args).catch((error: unknown) => {
      throw fromDatabase(error) ?? error;
    });
}
