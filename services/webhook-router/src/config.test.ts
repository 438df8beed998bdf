import { expect, it } from '@jest/globals';
import { parseConfig } from '@latchkey/config';
import { configSchema, perUrlSlots } from './config.js';

const required = { NATS_PASSWORD: 'natsPasswordForTests0123456789abcdef' };

it('refuses a retry cap longer than a Node timer can wait, which would retry at once instead', () => {
  expect(() => parseConfig(configSchema, { ...required, WEBHOOK_RETRY_CAP_MS: String(2 ** 31) })).toThrow(/WEBHOOK_RETRY_CAP_MS: must be at most 2147483647/);
  expect(parseConfig(configSchema, { ...required, WEBHOOK_RETRY_CAP_MS: String(2 ** 31 - 1) }).WEBHOOK_RETRY_CAP_MS).toBe(2 ** 31 - 1);
});

it("gives one URL an eighth of a replica's delivery slots unless told otherwise, never more than all of them, one at least", () => {
  const slots = (env: Record<string, string>) => perUrlSlots(parseConfig(configSchema, { ...required, ...env }));
  expect(slots({})).toBe(8);
  expect(slots({ WEBHOOK_CONCURRENCY: '4' })).toBe(1);
  expect(slots({ WEBHOOK_CONCURRENCY_PER_URL: '20' })).toBe(20);
  expect(slots({ WEBHOOK_CONCURRENCY: '16', WEBHOOK_CONCURRENCY_PER_URL: '20' })).toBe(16);
  expect(() => slots({ WEBHOOK_CONCURRENCY_PER_URL: '0' })).toThrow(/WEBHOOK_CONCURRENCY_PER_URL/);
});
