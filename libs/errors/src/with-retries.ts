export interface RetryOptions {
  /** How long to keep trying, from the first try: a wait that would end past it is not begun. */
  forMs: number;
  /** The wait after the first failure; each next one doubles, up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** Which failures are worth another try (default: every one); any other is thrown at once. */
  retryIf?: (error: unknown) => boolean;
  /** Told of each failure tried again (to log it, or keep a lock alive), before the wait. */
  onRetry?: (error: unknown, tries: number, delayMs: number) => unknown;
}

/**
 * Runs `attempt` until it succeeds, trying again with doubling waits while its failures pass
 * `retryIf` and `forMs` lasts; then throws the last failure. Work that must outlive an outage
 * (NATS electing a leader, the database restarting) without giving up what it holds.
 */
export async function withRetries<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  const deadline = Date.now() + options.forMs;
  let delayMs = options.firstDelayMs;
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(options.retryIf?.(error) ?? true) || Date.now() + delayMs > deadline) throw error;
      await options.onRetry?.(error, tries, delayMs);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      delayMs = Math.min(delayMs * 2, options.maxDelayMs);
    }
  }
}
