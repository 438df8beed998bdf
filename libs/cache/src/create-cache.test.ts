import { describe, expect, it, jest } from '@jest/globals';
import { createCache } from './create-cache.js';

function clock() {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('createCache', () => {
  it('holds at most maxWeight, dropping the least recently used first, and stores nothing heavier than the bound', () => {
    const cache = createCache<string>({ maxEntries: 100, ttlMs: 60_000, maxWeight: { total: 10, weigh: (value) => value.length } });
    cache.set('a', 'xxxx');
    cache.set('b', 'xxxx');
    cache.get('a');
    cache.set('c', 'xxxx');
    expect([cache.has('a'), cache.has('b'), cache.has('c')]).toEqual([true, false, true]);
    cache.set('d', 'x'.repeat(11));
    expect(cache.has('d')).toBe(false);
    expect([cache.has('a'), cache.has('c')]).toEqual([true, true]);
  });

  it('holds at most maxEntries, dropping the least recently used first', () => {
    const cache = createCache<string>({ maxEntries: 2, ttlMs: 60_000 });
    cache.set('a', 'A');
    cache.set('b', 'B');
    expect(cache.get('a')).toBe('A'); // a is now the most recently used
    cache.set('c', 'C');
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe('A');
    expect(cache.get('c')).toBe('C');
    expect(cache.size()).toBe(2);
  });

  it('sets no timer when it is read (a hot path reads it once a call)', async () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.set('a', 'A');
    const setTimer = jest.spyOn(globalThis, 'setTimeout');
    try {
      for (let read = 0; read < 5; read++) {
        // Reads a few milliseconds apart, as a replica's under load.
        const until = performance.now() + 3;
        while (performance.now() < until);
        expect(cache.get('a')).toBe('A');
      }
      expect(setTimer).not.toHaveBeenCalled();
    } finally {
      setTimer.mockRestore();
    }
  });

  it('forgets an entry when its time is up, with a per-entry ttl where given', () => {
    const time = clock();
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 1000, now: time.now });
    cache.set('default', 'x');
    cache.set('short', 'y', { ttlMs: 100 });
    time.advance(99);
    expect(cache.get('short')).toBe('y');
    time.advance(1);
    expect(cache.get('short')).toBeUndefined();
    expect(cache.get('default')).toBe('x');
    time.advance(900);
    expect(cache.get('default')).toBeUndefined();
    expect(cache.has('default')).toBe(false);
  });

  it('without a ttl, keeps entries until they are evicted', () => {
    const time = clock();
    const cache = createCache<string>({ maxEntries: 1, now: time.now });
    cache.set('a', 'A');
    time.advance(365 * 24 * 3600 * 1000);
    expect(cache.get('a')).toBe('A');
    cache.set('b', 'B');
    expect(cache.get('a')).toBeUndefined();
  });

  it('does not store a value whose life is already over', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 1000 });
    cache.set('k', 'v', { ttlMs: 0 });
    cache.set('k2', 'v', { ttlMs: -5 });
    expect(cache.size()).toBe(0);
  });

  it('invalidates every entry carrying a tag, and only those', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.set('env1/github/a', 'one', { tags: ['conn-1'] });
    cache.set('env1/gitlab/a', 'two', { tags: ['conn-1', 'env1'] });
    cache.set('env1/github/b', 'three', { tags: ['conn-2', 'env1'] });
    cache.invalidate('conn-1');
    expect(cache.get('env1/github/a')).toBeUndefined();
    expect(cache.get('env1/gitlab/a')).toBeUndefined();
    expect(cache.get('env1/github/b')).toBe('three');
    cache.invalidate('env1');
    expect(cache.get('env1/github/b')).toBeUndefined();
  });

  it('re-tags an entry that is set again, so an old tag no longer reaches it', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.set('k', 'v1', { tags: ['old'] });
    cache.set('k', 'v2', { tags: ['new'] });
    cache.invalidate('old');
    expect(cache.get('k')).toBe('v2');
    cache.invalidate('new');
    expect(cache.get('k')).toBeUndefined();
  });

  it('keeps the tag index bounded with the entries it points at', () => {
    const cache = createCache<string>({ maxEntries: 1, ttlMs: 60_000 });
    cache.set('a', 'A', { tags: ['t'] });
    cache.set('b', 'B', { tags: ['u'] }); // evicts a
    cache.set('a', 'A2');
    cache.invalidate('t'); // must not reach the untagged new a
    expect(cache.get('a')).toBe('A2');
  });

  it('does not store a read that an invalidation overtook', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    const before = cache.stamp();
    cache.invalidate('anything');
    cache.set('k', 'stale', { since: before });
    expect(cache.get('k')).toBeUndefined();
    const after = cache.stamp();
    cache.set('k', 'fresh', { since: after });
    expect(cache.get('k')).toBe('fresh');
  });

  it('a stamp for one tag survives invalidations of other tags, not a clear', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    const forA = cache.stamp('a');
    cache.invalidate('b');
    expect(forA.current()).toBe(true);
    cache.invalidate('a');
    expect(forA.current()).toBe(false);
    const again = cache.stamp('a');
    cache.clear();
    expect(again.current()).toBe(false);
  });

  it('clear drops everything', () => {
    const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.set('a', 'A', { tags: ['t'] });
    cache.set('b', 'B');
    cache.clear();
    expect(cache.size()).toBe(0);
    cache.set('a', 'A2');
    cache.invalidate('t');
    expect(cache.get('a')).toBe('A2');
  });

  describe('load', () => {
    it('answers a hit synchronously and shares one load between concurrent misses', async () => {
      const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
      const gate = deferred<string>();
      let loads = 0;
      const loader = () => {
        loads++;
        return gate.promise;
      };
      const first = cache.load('k', loader);
      const second = cache.load('k', loader);
      expect(first).toBe(second);
      gate.resolve('v');
      await expect(first).resolves.toBe('v');
      expect(loads).toBe(1);
      expect(cache.load('k', loader)).toBe('v');
      expect(loads).toBe(1);
    });

    it('keeps no failure, and the next miss loads again', async () => {
      const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
      await expect(cache.load('k', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
      expect(cache.size()).toBe(0);
      await expect(cache.load('k', () => Promise.resolve('up'))).resolves.toBe('up');
      expect(cache.get('k')).toBe('up');
    });

    it('places a loaded value as told: tags, ttl, or not at all', async () => {
      const time = clock();
      const cache = createCache<{ id: string; keep: boolean }>({ maxEntries: 10, ttlMs: 60_000, now: time.now });
      const place = (value: { id: string; keep: boolean }) => (value.keep ? { tags: [value.id], ttlMs: 10 } : false as const);
      await cache.load('kept', () => Promise.resolve({ id: 'c1', keep: true }), { place });
      await cache.load('skipped', () => Promise.resolve({ id: 'c2', keep: false }), { place });
      expect(cache.has('kept')).toBe(true);
      expect(cache.has('skipped')).toBe(false);
      cache.invalidate('c1');
      expect(cache.has('kept')).toBe(false);
      await cache.load('kept', () => Promise.resolve({ id: 'c1', keep: true }), { place });
      time.advance(10);
      expect(cache.has('kept')).toBe(false);
    });

    it('does not store a load that an invalidation overtook', async () => {
      const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
      const gate = deferred<string>();
      const loading = cache.load('k', () => gate.promise);
      cache.invalidate('k-tag');
      gate.resolve('maybe stale');
      await expect(loading).resolves.toBe('maybe stale');
      expect(cache.get('k')).toBeUndefined();
    });

    it('with a tag, only invalidations of that tag stop the load being stored', async () => {
      const cache = createCache<string>({ maxEntries: 10, ttlMs: 60_000 });
      const a = deferred<string>();
      const b = deferred<string>();
      const loadingA = cache.load('a', () => a.promise, { tag: 'ta', place: () => ({ tags: ['ta'] }) });
      const loadingB = cache.load('b', () => b.promise, { tag: 'tb', place: () => ({ tags: ['tb'] }) });
      cache.invalidate('tb');
      a.resolve('A');
      b.resolve('B');
      await Promise.all([loadingA, loadingB]);
      expect(cache.get('a')).toBe('A');
      expect(cache.get('b')).toBeUndefined();
    });
  });
});
