import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { ConfigError, parseConfig } from '@latchkey/config';
import { configSchema } from './config.js';

const key = () => randomBytes(32).toString('base64');
const required = {
  NATS_URL: 'nats://127.0.0.1:4222',
  NATS_PASSWORD: 'natsPasswordForTests0123456789abcdef',
  MONGODB_URI: 'mongodb://127.0.0.1:27017',
  ADMIN_TOKEN: 'admin-token-for-tests-0123456789abcdef',
  API_KEY_DIGEST_SECRET: 'digest-secret-for-tests-0123456789abcdef',
};

describe('gateway config', () => {
  it('seals with the highest settings key unless told which', () => {
    const config = parseConfig(configSchema, { ...required, SETTINGS_ENCRYPTION_KEYS: `v1:${key()},v2:${key()}` });
    expect(config.SETTINGS_SEALING_VERSION).toBeUndefined();
    expect(parseConfig(configSchema, { ...required, SETTINGS_ENCRYPTION_KEYS: `v1:${key()},v2:${key()}`, SETTINGS_SEALING_VERSION: 'v1' }).SETTINGS_SEALING_VERSION).toBe('v1');
  });

  it('refuses a sealing version that is not among the settings keys', () => {
    const parse = () => parseConfig(configSchema, { ...required, SETTINGS_ENCRYPTION_KEYS: `v1:${key()}`, SETTINGS_SEALING_VERSION: 'v2' });
    expect(parse).toThrow(ConfigError);
    expect(parse).toThrow(/SETTINGS_SEALING_VERSION: must be one of the versions of SETTINGS_ENCRYPTION_KEYS/);
  });
});
