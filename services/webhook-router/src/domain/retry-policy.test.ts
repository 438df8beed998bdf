import { describe, expect, it } from '@jest/globals';
import { nextHoldDelay, nextRetryDelay } from './retry-policy.js';

describe('the wait of a delivery an open circuit holds', () => {
  const base = { createdAt: 0, now: 10_000, baseMs: 1_000, capMs: 60_000, windowMs: 3_600_000, random: () => 1 };

  it("lasts until the circuit lets an attempt go, and longer each time it is held again, up to the cap", () => {
    expect(nextHoldDelay({ ...base, holds: 1, circuitWaitMs: 30_000 })).toBe(30_000);
    expect(nextHoldDelay({ ...base, holds: 6, circuitWaitMs: 30_000 })).toBe(32_000);
    expect(nextHoldDelay({ ...base, holds: 20, circuitWaitMs: 5_000 })).toBe(60_000);
  });

  it("ends with the retry window, and is none when the circuit's wait would outlast it (the last attempt goes now)", () => {
    expect(nextHoldDelay({ ...base, now: 3_590_000, holds: 20, circuitWaitMs: 5_000 })).toBe(10_000);
    expect(nextHoldDelay({ ...base, now: 3_590_000, holds: 1, circuitWaitMs: 15_000 })).toBeNull();
  });
});

describe('the wait of a delivery whose attempt failed', () => {
  const hour = 3_600_000;
  const base = { createdAt: 0, baseMs: 5_000, capMs: hour, windowMs: 24 * hour, retryAfterMs: null, random: () => 0.9 };

  it("ends with the retry window: the last attempt goes when it closes, not an hour before", () => {
    // Failing since it was made, attempt 30 fails at 23 h 10 min: its step (up to an hour) would pass the window's end.
    expect(nextRetryDelay({ ...base, attempt: 30, now: 23 * hour + 10 * 60_000 })).toBe(50 * 60_000);
    expect(nextRetryDelay({ ...base, attempt: 1, retryAfterMs: hour, now: 24 * hour - 1_000 })).toBe(1_000);
  });

  it('is none once the window has closed: that attempt was the last', () => {
    expect(nextRetryDelay({ ...base, attempt: 31, now: 24 * hour })).toBeNull();
    expect(nextRetryDelay({ ...base, attempt: 31, now: 24 * hour + 5_000 })).toBeNull();
  });
});
