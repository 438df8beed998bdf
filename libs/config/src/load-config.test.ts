import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { ConfigError, baseServiceSchema, parseConfig, secret } from './index.js';

const schema = baseServiceSchema('credential-vault', 3010).extend({ ENCRYPTION_KEYS: secret(), PORT: z.coerce.number().int() });

describe('parseConfig', () => {
  it('applies defaults and coerces numbers', () => {
    const config = parseConfig(schema, { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' });
    expect(config).toMatchObject({ NATS_URL: 'nats://127.0.0.1:4222', MONGODB_DB: 'latchkey_credential_vault', PORT: 80, HEALTH_PORT: 3010 });
  });

  it('lists every problem at once and never defaults a secret', () => {
    let caught: unknown;
    try {
      parseConfig(schema, { PORT: 'eighty', MONGODB_URI: 'postgres://x', ENCRYPTION_KEYS: '' });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const problems = (caught as ConfigError).problems.join('\n');
    expect(problems).toMatch(/ENCRYPTION_KEYS: is required/);
    expect(problems).toMatch(/NATS_PASSWORD: is required/);
    expect(problems).toMatch(/PORT:/);
    expect(problems).toMatch(/MONGODB_URI: must be a mongodb/);
  });

  it('refuses a NATS password the NATS server would read as a number', () => {
    for (const password of [`1${'a'.repeat(40)}`, `-${'a'.repeat(40)}`, '9'.repeat(40)]) {
      expect(() => parseConfig(schema, { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: password, PORT: '80' })).toThrow(/NATS_PASSWORD: must start with a letter/);
    }
  });

  it('reads JETSTREAM_REPLICAS, 1 by default, and refuses a count NATS cannot hold', () => {
    const base = { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' };
    expect(parseConfig(schema, base).JETSTREAM_REPLICAS).toBe(1);
    expect(parseConfig(schema, { ...base, JETSTREAM_REPLICAS: '3' }).JETSTREAM_REPLICAS).toBe(3);
    for (const replicas of ['0', 'abc', '6', '1.5', '-1']) {
      expect(() => parseConfig(schema, { ...base, JETSTREAM_REPLICAS: replicas })).toThrow(/JETSTREAM_REPLICAS/);
    }
  });

  it('reads JOBS_STREAM_MAX_BYTES, unset by default (the contracts\' bound), and refuses one too small to hold a few webhooks', () => {
    const base = { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' };
    expect(parseConfig(schema, base).JOBS_STREAM_MAX_BYTES).toBeUndefined();
    expect(parseConfig(schema, { ...base, JOBS_STREAM_MAX_BYTES: '21474836480' }).JOBS_STREAM_MAX_BYTES).toBe(20 * 1024 ** 3);
    for (const bytes of ['0', '1048576', 'abc', '1e9.5']) {
      expect(() => parseConfig(schema, { ...base, JOBS_STREAM_MAX_BYTES: bytes })).toThrow(/JOBS_STREAM_MAX_BYTES/);
    }
  });

  it('takes a comma-separated NATS_URL (a cluster) as it is, and waits for JetStream 5 minutes by default', () => {
    const base = { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' };
    const servers = 'nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222';
    expect(parseConfig(schema, { ...base, NATS_URL: servers })).toMatchObject({ NATS_URL: servers, JETSTREAM_SETUP_TIMEOUT_MS: 300_000 });
  });

  it('takes JETSTREAM_SETUP_TIMEOUT_MS=0: start does not wait for JetStream at all', () => {
    const base = { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' };
    expect(parseConfig(schema, { ...base, JETSTREAM_SETUP_TIMEOUT_MS: '0' }).JETSTREAM_SETUP_TIMEOUT_MS).toBe(0);
    expect(() => parseConfig(schema, { ...base, JETSTREAM_SETUP_TIMEOUT_MS: '-1' })).toThrow(/JETSTREAM_SETUP_TIMEOUT_MS/);
  });

  it('refuses a timeout longer than a Node timer can wait (which would fire after 1 ms), and a zero request or shutdown timeout', () => {
    const base = { ENCRYPTION_KEYS: 'x'.repeat(32), NATS_PASSWORD: 'n'.repeat(32), PORT: '80' };
    for (const name of ['REQUEST_TIMEOUT_MS', 'SHUTDOWN_TIMEOUT_MS', 'JETSTREAM_SETUP_TIMEOUT_MS']) {
      expect(parseConfig(schema, { ...base, [name]: '2147483647' })).toMatchObject({ [name]: 2_147_483_647 });
      expect(() => parseConfig(schema, { ...base, [name]: '2147483648' })).toThrow(new RegExp(`${name}: must be at most 2147483647`));
    }
    for (const name of ['REQUEST_TIMEOUT_MS', 'SHUTDOWN_TIMEOUT_MS']) {
      expect(() => parseConfig(schema, { ...base, [name]: '0' })).toThrow(new RegExp(name));
    }
  });
});
