import { describe, expect, it } from '@jest/globals';
import type { ProxyCredentials } from '@latchkey/contracts';
import { createCredentialCache } from './credential-cache.js';

const credentials = (id: string, expiresAt: string | null = null): ProxyCredentials => ({
  id,
  provider: 'p',
  auth_mode: 'API_KEY',
  expires_at: expiresAt,
  headers: { 'X-Api-Key': 'k' },
  query: {},
  decompress: false,
});

describe('proxy credential cache', () => {
  it('drops every entry of a connection when the vault announces a write', () => {
    const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
    cache.set('a', credentials('conn_1'), cache.generation());
    expect(cache.get('a')).toBeDefined();
    cache.invalidate('conn_1');
    expect(cache.get('a')).toBeUndefined();
  });

  it('keeps a token no later than the start of its refresh window', () => {
    let now = 0;
    const cache = createCredentialCache({ ttlMs: 3_600_000, maxEntries: 10, now: () => now });
    cache.set('a', credentials('conn_1', new Date(20 * 60_000).toISOString()), cache.generation());
    now = 4 * 60_000;
    expect(cache.get('a')).toBeDefined();
    now = 6 * 60_000;
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', credentials('conn_2', new Date(now + 60_000).toISOString()), cache.generation());
    expect(cache.get('b')).toBeUndefined();
  });

  it('ignores a read that an invalidation overtook', () => {
    const cache = createCredentialCache({ ttlMs: 60_000, maxEntries: 10 });
    const readAt = cache.generation();
    cache.invalidate('conn_1');
    cache.set('a', credentials('conn_1'), readAt);
    expect(cache.get('a')).toBeUndefined();
  });
});
