import { describe, expect, it } from '@jest/globals';
import { withRetries } from './with-retries.js';

const failing = (failures: number, error: Error = new Error('away')) => {
  let calls = 0;
  const attempt = async () => {
    calls += 1;
    if (calls <= failures) throw error;
    return calls;
  };
  return { attempt, calls: () => calls };
};

describe('withRetries', () => {
  it('tries again with doubling waits until the attempt succeeds, telling each retry', async () => {
    const { attempt } = failing(3);
    const told: Array<[number, number]> = [];
    await expect(withRetries(attempt, { forMs: 5_000, firstDelayMs: 5, maxDelayMs: 12, onRetry: (_error, tries, delayMs) => told.push([tries, delayMs]) })).resolves.toBe(4);
    expect(told).toEqual([[1, 5], [2, 10], [3, 12]]);
  });

  it('throws at once a failure that is not worth another try', async () => {
    const { attempt, calls } = failing(5, new Error('refused'));
    await expect(withRetries(attempt, { forMs: 5_000, firstDelayMs: 5, maxDelayMs: 5, retryIf: (error) => (error as Error).message !== 'refused' })).rejects.toThrow('refused');
    expect(calls()).toBe(1);
  });

  it('throws the last failure once the next wait would end past its time', async () => {
    const { attempt, calls } = failing(100);
    await expect(withRetries(attempt, { forMs: 60, firstDelayMs: 20, maxDelayMs: 20 })).rejects.toThrow('away');
    expect(calls()).toBeGreaterThanOrEqual(2);
    expect(calls()).toBeLessThanOrEqual(4);
  });
});
