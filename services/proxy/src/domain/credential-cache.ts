import type { ProxyCredentials } from '@latchkey/contracts';

/** Inside this much of expiry, credentials are asked for again (the vault refreshes them). */
const REFRESH_WINDOW_MS = 15 * 60 * 1000;

/**
 * Credentials by environment, integration and connection, kept in memory so a proxied call
 * makes no vault round trip and no database read. Entries go when the vault announces a write
 * to the connection, when their TTL passes, or when the token nears its expiry.
 */
export function createCredentialCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const entries = new Map<string, { value: ProxyCredentials; until: number }>();
  const keysById = new Map<string, Set<string>>();
  let generation = 0;

  return {
    generation: () => generation,
    get(key: string): ProxyCredentials | undefined {
      const entry = entries.get(key);
      return entry && entry.until > now() ? entry.value : undefined;
    },
    set(key: string, value: ProxyCredentials, readAt: number): void {
      if (readAt !== generation) return;
      const expiresAt = value.expires_at ? Date.parse(value.expires_at) - REFRESH_WINDOW_MS : Number.POSITIVE_INFINITY;
      const until = Math.min(now() + options.ttlMs, expiresAt);
      if (until <= now()) return;
      if (entries.size >= options.maxEntries) {
        const oldest = entries.keys().next().value as string;
        const evicted = entries.get(oldest);
        entries.delete(oldest);
        if (evicted) keysById.get(evicted.value.id)?.delete(oldest);
      }
      entries.set(key, { value, until });
      let keys = keysById.get(value.id);
      if (!keys) keysById.set(value.id, (keys = new Set()));
      keys.add(key);
    },
    invalidate(id: string): void {
      generation++;
      for (const key of keysById.get(id) ?? []) entries.delete(key);
      keysById.delete(id);
    },
    clear(): void {
      generation++;
      entries.clear();
      keysById.clear();
    },
  };
}

export type CredentialCache = ReturnType<typeof createCredentialCache>;
