import { describe, expect, it } from '@jest/globals';
import { settledWithin } from './settled-within.js';

describe('settledWithin', () => {
  it('is true for work that succeeds or fails in time, false for work that does not', async () => {
    expect(await settledWithin(Promise.resolve('done'), 1_000)).toBe(true);
    expect(await settledWithin(Promise.reject(new Error('failed')), 1_000)).toBe(true);
    expect(await settledWithin(new Promise(() => undefined), 10)).toBe(false);
  });
});
