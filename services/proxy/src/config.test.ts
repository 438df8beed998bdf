import { describe, expect, it } from '@jest/globals';
import { parseConfig } from '@latchkey/config';
import { configSchema } from './config.js';

describe('proxy config', () => {
  it('reads no database settings: the proxy stores nothing and holds no database credential', () => {
    const config = parseConfig(configSchema, {
      NATS_PASSWORD: 'natsPasswordForTests0123456789abcdef',
      // Left over from an older deployment: ignored, not read.
      MONGODB_URI: 'mongodb://user:secret@127.0.0.1:27017',
      MONGODB_DB: 'latchkey_proxy',
    });
    expect(config).not.toHaveProperty('MONGODB_URI');
    expect(config).not.toHaveProperty('MONGODB_DB');
    expect(config.HEALTH_PORT).toBe(3011);
    // Bounded by default: a burst cannot grow a replica's memory without limit.
    expect(config.PROXY_MAX_IN_FLIGHT).toBe(2_048);
  });
});
