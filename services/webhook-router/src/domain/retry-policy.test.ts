import { describe, expect, it } from '@jest/globals';
import { nextHoldDelay } from './retry-policy.js';

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
