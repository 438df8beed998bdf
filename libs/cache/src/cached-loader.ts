import { createCache, type CacheOptions } from './create-cache.js';

/**
 * `load` behind a cache: each answer (null included) is kept for the cache's ttl, concurrent
 * misses of one key share one load, and a failure is not kept. For settings read from another
 * service, where a short staleness is the agreed price of not asking on every message.
 */
export function cachedLoader<V>(load: (key: string) => Promise<V>, options: CacheOptions): (key: string) => Promise<V> {
  // Boxed, so that null and undefined answers are kept like any other.
  const cache = createCache<{ value: V }>(options);
  return async (key) => (await cache.load(key, async () => ({ value: await load(key) }))).value;
}
