import { expect, it } from '@jest/globals';
import { parseConfig } from '@latchkey/config';
import { configSchema } from './config.js';

const required = { NATS_PASSWORD: 'natsPasswordForTests0123456789abcdef' };

it('refuses a retry cap longer than a Node timer can wait, which would retry at once instead', () => {
  expect(() => parseConfig(configSchema, { ...required, WEBHOOK_RETRY_CAP_MS: String(2 ** 31) })).toThrow(/WEBHOOK_RETRY_CAP_MS: must be at most 2147483647/);
  expect(parseConfig(configSchema, { ...required, WEBHOOK_RETRY_CAP_MS: String(2 ** 31 - 1) }).WEBHOOK_RETRY_CAP_MS).toBe(2 ** 31 - 1);
});
