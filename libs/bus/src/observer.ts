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
}

export const noObserver: BusObserver = { requested: () => undefined, served: () => undefined, consumed: () => undefined };

export const secondsSince = (start: number): number => (performance.now() - start) / 1000;
