/**
 * Answers kept for `ttlMs`, with concurrent misses for one key sharing one load, so a burst of
 * webhooks for one environment costs one request. Failures are not kept.
 */
export function createTtlCache<V>(load: (key: string) => Promise<V>, options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const entries = new Map<string, { value: Promise<V>; until: number }>();
  return {
    get(key: string): Promise<V> {
      const entry = entries.get(key);
      if (entry && entry.until > now()) return entry.value;
      if (entries.size >= options.maxEntries) entries.clear();
      const value = load(key);
      entries.set(key, { value, until: now() + options.ttlMs });
      value.catch(() => entries.delete(key));
      return value;
    },
    clear: () => entries.clear(),
  };
}
