/**
 * When a failed delivery is tried again: exponential back-off from `baseMs` with jitter (a
 * random point in the upper half of the step, so a crowd of deliveries spreads out but none
 * comes back early), capped at `capMs`; a receiver's Retry-After wins when longer, up to the cap.
 * Never past the retry window's end (`WEBHOOK_RETRY_HOURS` after the delivery was made): a step
 * that would pass it is cut short, so the last attempt goes when the window closes rather than
 * up to a cap's length before. Null once the window has closed: this attempt was the last.
 */
export function nextRetryDelay(input: {
  attempt: number;
  retryAfterMs: number | null;
  createdAt: number;
  now: number;
  baseMs: number;
  capMs: number;
  windowMs: number;
  random?: () => number;
}): number | null {
  const jittered = backOff(input.attempt, input);
  const delay = Math.min(input.capMs, Math.max(jittered, input.retryAfterMs ?? 0));
  const windowLeft = input.createdAt + input.windowMs - input.now;
  if (windowLeft <= 0) return null;
  return Math.round(Math.min(delay, windowLeft));
}

/** The `n`-th wait of a back-off: `baseMs × 2^(n-1)` capped at `capMs`, at a random point in the upper half of that step. */
function backOff(n: number, input: { baseMs: number; capMs: number; random?: () => number }): number {
  const random = input.random ?? Math.random;
  const step = Math.min(input.capMs, input.baseMs * 2 ** Math.min(Math.max(n - 1, 0), 30));
  return step / 2 + random() * (step / 2);
}

/**
 * How long a delivery that its URL's open circuit holds waits before it is looked at again: at
 * least until the circuit lets an attempt go (`circuitWaitMs`), and, held again and again,
 * longer each time, by the steps retries take (`holds` in a row, this one included), so that a
 * dead URL's backlog comes back a few times an hour rather than at every cooldown. Never past
 * the retry window's end. Null when the circuit's own wait would outlast the window: the
 * delivery then gets its last attempt now.
 */
export function nextHoldDelay(input: {
  holds: number;
  circuitWaitMs: number;
  createdAt: number;
  now: number;
  baseMs: number;
  capMs: number;
  windowMs: number;
  random?: () => number;
}): number | null {
  const windowLeft = input.createdAt + input.windowMs - input.now;
  if (input.circuitWaitMs > windowLeft) return null;
  return Math.round(Math.min(windowLeft, Math.max(input.circuitWaitMs, backOff(input.holds, input))));
}

/** Retry-After: seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** Network errors, timeouts, 5xx, 408 and 429 are worth another attempt; other answers are final. */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}
