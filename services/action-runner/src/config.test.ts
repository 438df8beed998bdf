import { expect, it } from '@jest/globals';
import { parseConfig } from '@latchkey/config';
import { configSchema, syncSlots } from './config.js';

const required = { NATS_PASSWORD: 'natsPasswordForTests0123456789abcdef' };

it('refuses a sync timeout longer than a Node timer can wait, which would end every sync run at once', () => {
  // A month: past 2^31 - 1 ms, a timer fires after 1 ms.
  expect(() => parseConfig(configSchema, { ...required, SYNC_TIMEOUT_MS: String(30 * 86_400_000) })).toThrow(/SYNC_TIMEOUT_MS: must be at most 2147483647/);
  expect(parseConfig(configSchema, { ...required, SYNC_TIMEOUT_MS: String(7 * 86_400_000) }).SYNC_TIMEOUT_MS).toBe(7 * 86_400_000);
  expect(() => parseConfig(configSchema, { ...required, FUNCTION_TIMEOUT_MS: '0' })).toThrow(/FUNCTION_TIMEOUT_MS/);
});

it('leaves syncs three quarters of the run slots by default, one at least, and never more than there are', () => {
  const slots = (FUNCTION_CONCURRENCY: number, SYNC_CONCURRENCY?: number) => syncSlots({ FUNCTION_CONCURRENCY, SYNC_CONCURRENCY });
  expect([1, 2, 4, 8, 16].map((total) => slots(total))).toEqual([1, 1, 3, 6, 12]);
  expect(slots(8, 2)).toBe(2);
  expect(slots(4, 10)).toBe(4);
});
