import { describe, expect, it } from '@jest/globals';
import { createKeyCache, type StoredKey } from './key-cache.js';

const stored: StoredKey = { _id: 'key_1', environment_id: 'env_1', account_id: 'acc_1', scopes: ['environment:connections:read_credentials'] };

const digestOf = (secret: string) => `digest-of-${secret}`;

function counting(result: StoredKey | null) {
  const calls: string[] = [];
  return { calls, digestOf, findByDigest: async (digest: string) => (calls.push(digest), result) };
}

describe('key cache', () => {
  it('answers hits from memory, synchronously', async () => {
    const source = counting(stored);
    const cache = createKeyCache(source, { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10, maxUnknown: 10 });
    await cache.resolve('d1');
    const hit = cache.resolve('d1');
    expect(hit).not.toBeInstanceOf(Promise);
    expect(hit).toMatchObject({ keyId: 'key_1', environmentId: 'env_1' });
    expect(source.calls).toEqual(['digest-of-d1']);
  });

  it('shares one read between concurrent misses', async () => {
    const source = counting(stored);
    const cache = createKeyCache(source, { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10, maxUnknown: 10 });
    await Promise.all(Array.from({ length: 50 }, () => cache.resolve('d1')));
    expect(source.calls).toHaveLength(1);
  });

  it('expands _credentials scopes to their plain scope', async () => {
    const cache = createKeyCache(counting(stored), { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10, maxUnknown: 10 });
    const key = await cache.resolve('d1');
    expect(key?.scopes.has('environment:connections:read')).toBe(true);
  });

  it('forgets a digest on invalidate and unknown digests after their short TTL', async () => {
    let now = 0;
    const source = counting(null);
    const cache = createKeyCache({ ...source, now: () => now }, { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10, maxUnknown: 10 });
    expect(await cache.resolve('x')).toBeNull();
    expect(cache.resolve('x')).toBeNull();
    now = 1001;
    await cache.resolve('x');
    expect(source.calls).toHaveLength(2);
    cache.invalidate('digest-of-x');
    await cache.resolve('x');
    expect(source.calls).toHaveLength(3);
  });

  it('does not cache a read that an invalidation overtook', async () => {
    let release: (value: StoredKey) => void = () => undefined;
    const calls: string[] = [];
    const cache = createKeyCache(
      { digestOf, findByDigest: (digest) => (calls.push(digest), new Promise<StoredKey>((resolve) => (release = resolve))) },
      { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10, maxUnknown: 10 },
    );
    const pending = cache.resolve('d1');
    cache.invalidate('digest-of-d1');
    release(stored);
    await pending;
    expect(cache.size()).toBe(0);
  });
});
