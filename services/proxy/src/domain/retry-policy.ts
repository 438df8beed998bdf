/** Network failures worth another attempt: the connection broke or never came up. */
export const RETRYABLE_NETWORK_CODES = new Set(['ECONNRESET', 'ETIMEDOUT', 'ECONNABORTED', 'ECONNREFUSED', 'EPIPE', 'EAI_AGAIN']);

/** 5xx, 429 and the caller's `Retry-On` codes are retried. */
export function isRetryableStatus(status: number, retryOn: readonly number[]): boolean {
  return status >= 500 || status === 429 || retryOn.includes(status);
}

/**
 * Wait before retry number `attempt` (1-based): exponential from 200 ms with full jitter, or the
 * provider's Retry-After (seconds or an HTTP date) when it gives one; never more than `capMs`.
 */
export function retryDelayMs(attempt: number, retryAfter: string | undefined, capMs: number, random = Math.random, now = Date.now()): number {
  if (retryAfter !== undefined) {
    const seconds = Number(retryAfter);
    const fromHeader = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(retryAfter) - now;
    if (Number.isFinite(fromHeader) && fromHeader >= 0) return Math.min(capMs, fromHeader);
  }
  const ceiling = Math.min(capMs, 200 * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
