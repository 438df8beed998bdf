import { describe, expect, it } from '@jest/globals';
import { isRetryableStatus, retryDelayMs } from './retry-policy.js';

describe('retry policy', () => {
  it('retries 5xx, 429 and the Retry-On codes only', () => {
    expect(isRetryableStatus(503, [])).toBe(true);
    expect(isRetryableStatus(429, [])).toBe(true);
    expect(isRetryableStatus(409, [])).toBe(false);
    expect(isRetryableStatus(409, [409])).toBe(true);
  });

  it('backs off exponentially with jitter, under the cap', () => {
    expect(retryDelayMs(1, undefined, 10_000, () => 0)).toBe(100);
    expect(retryDelayMs(3, undefined, 10_000, () => 1)).toBe(800);
    expect(retryDelayMs(20, undefined, 10_000, () => 1)).toBe(10_000);
  });

  it('honours Retry-After in seconds or as a date, up to the cap', () => {
    expect(retryDelayMs(1, '2', 10_000)).toBe(2000);
    expect(retryDelayMs(1, '120', 10_000)).toBe(10_000);
    expect(retryDelayMs(1, new Date(1_000_000 + 3000).toUTCString(), 10_000, Math.random, 1_000_000)).toBe(3000);
  });
});
