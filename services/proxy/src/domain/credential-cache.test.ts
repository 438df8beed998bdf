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

  it('keeps a token no later than the start of its refresh window: 15 minutes before it expires', () => {
    let now = 0;
    const cache = createCredentialCache({ ttlMs: 3_600_000, maxEntries: 10, now: () => now });
    cache.set('a', credentials('conn_1', new Date(60 * 60_000).toISOString()), cache.generation());
    now = 44 * 60_000;
    expect(cache.get('a')).toBeDefined();
    now = 46 * 60_000;
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', credentials('conn_2', new Date(now + 60_000).toISOString()), cache.generation());
    expect(cache.get('b')).toBeUndefined();
  });

  // The vault refreshes a token that lives less than half an hour in the second half of its
  // life: handed out with ten minutes left, it was never kept, and every call asked the vault.
  it('keeps a short-lived token for the first half of what is left of it, and never into its last two minutes', () => {
    let now = 0;
    const cache = createCredentialCache({ ttlMs: 3_600_000, maxEntries: 10, now: () => now });
    cache.set('a', credentials('conn_1', new Date(10 * 60_000).toISOString()), cache.generation());
    now = 4.5 * 60_000;
    expect(cache.get('a')).toBeDefined();
    now = 5.5 * 60_000;
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', credentials('conn_2', new Date(now + 3 * 60_000).toISOString()), cache.generation());
    now += 50_000;
    expect(cache.get('b')).toBeDefined();
    now += 20_000;
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
