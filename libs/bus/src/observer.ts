/**
 * What the bus tells about its traffic (for metrics): the contract's subject template (never a
 * subject carrying a caller or an id), the seconds taken, and the error code of a failure.
 * Called on the hot path: an observer must be cheap and never throw.
 */
export interface BusObserver {
  /** A request this service sent, answered or not. */
  requested(subject: string, seconds: number, errorCode: string | undefined): void;
  /** A request this service answered. */
  served(subject: string, seconds: number, errorCode: string | undefined): void;
  /** A JetStream message a consumer handled (failed: nak'ed or terminated). */
  consumed(subject: string, seconds: number, errorCode: string | undefined): void;
  /** Operations of this service's operations log that JetStream stored (`busOperationLog`). */
  operationsSent(count: number): void;
  /** Operations its operations log dropped, and why. */
  operationsDropped(reason: OperationDropReason, count: number): void;
}

/**
 * Why the operations log dropped operations: its buffer was full (the bus slow or away), their
 * batch could not be sent, or one named an environment id no page may hold.
 */
export type OperationDropReason = 'buffer_full' | 'send_failed' | 'invalid_environment';

export const noObserver: BusObserver = {
  requested: () => undefined,
  served: () => undefined,
  consumed: () => undefined,
  operationsSent: () => undefined,
  operationsDropped: () => undefined,
};

export const secondsSince = (start: number): number => (performance.now() - start) / 1000;
