/**
 * When a failed delivery is tried again: exponential back-off from `baseMs` with jitter (a
 * random point in the upper half of the step, so a crowd of deliveries spreads out but none
 * comes back early), capped at `capMs`; a receiver's Retry-After wins when longer, up to the cap.
 * Null: the retry window (`WEBHOOK_RETRY_HOURS` after the delivery was made) would be past.
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
  const random = input.random ?? Math.random;
  const step = Math.min(input.capMs, input.baseMs * 2 ** Math.min(Math.max(input.attempt - 1, 0), 30));
  const jittered = step / 2 + random() * (step / 2);
  const delay = Math.min(input.capMs, Math.max(jittered, input.retryAfterMs ?? 0));
  if (input.now + delay > input.createdAt + input.windowMs) return null;
  return Math.round(delay);
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
