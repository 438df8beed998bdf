import { describe, expect, it } from '@jest/globals';
import type { ConnectionDoc } from '../db/connection-model.js';
import { createConnectionCache } from './connection-cache.js';

const doc = { _id: 'conn_1', environment_id: 'env', provider_config_key: 'github', connection_id: 'c1' } as ConnectionDoc;

describe('connection cache', () => {
  it('serves what was read until its TTL or an invalidation', () => {
    let now = 0;
    const cache = createConnectionCache({ ttlMs: 1000, maxEntries: 10, now: () => now });
    cache.set(doc, { type: 'API_KEY', apiKey: 'k' }, cache.generation());
    expect(cache.get('env', 'github', 'c1')?.credentials).toEqual({ type: 'API_KEY', apiKey: 'k' });
    now = 1001;
    expect(cache.get('env', 'github', 'c1')).toBeUndefined();
    cache.set(doc, {}, cache.generation());
    cache.invalidate('conn_1');
    expect(cache.get('env', 'github', 'c1')).toBeUndefined();
  });

  it('does not keep a read that an invalidation overtook', () => {
    const cache = createConnectionCache({ ttlMs: 1000, maxEntries: 10 });
    const readAt = cache.generation();
    cache.invalidate('conn_1');
    cache.set(doc, {}, readAt);
    expect(cache.get('env', 'github', 'c1')).toBeUndefined();
  });
});
