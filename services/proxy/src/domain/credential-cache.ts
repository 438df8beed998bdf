import { createCache, type Stamp } from '@latchkey/cache';
import type { ProxyCredentials, ProxyRequestMeta } from '@latchkey/contracts';

/**
 * Inside this much of expiry, credentials are asked for again (the vault refreshes them): 15
 * minutes, or, for a token handed out with less than half an hour left, half of what is left
 * (the vault refreshes a short-lived token in the second half of its life), and never less
 * than two minutes, so a call is never sent with a token about to lapse.
 */
const REFRESH_WINDOW_MS = 15 * 60 * 1000;
const SHORTEST_WINDOW_MS = 2 * 60 * 1000;
const windowFor = (leftMs: number) => Math.max(SHORTEST_WINDOW_MS, Math.min(REFRESH_WINDOW_MS, leftMs / 2));

/** The key of a call's credentials in the cache: its environment, integration and connection. */
export const credentialKey = (meta: Pick<ProxyRequestMeta, 'environment_id' | 'provider_config_key' | 'connection_id'>) =>
  `${meta.environment_id}\u0000${meta.provider_config_key}\u0000${meta.connection_id}`;

/**
 * Credentials by environment, integration and connection (`credentialKey`), kept in memory so
 * a proxied call makes no vault round trip and no database read. Entries go when the vault
 * announces a write to the connection (tagged with its id), when their TTL passes, or when the
 * token nears its expiry.
 */
export function createCredentialCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const cache = createCache<ProxyCredentials>(options);

  return {
    /** Taken before asking the vault; `set` stores nothing if a write was announced since. */
    generation: (): Stamp => cache.stamp(),
    get: (key: string): ProxyCredentials | undefined => cache.get(key),
    set(key: string, value: ProxyCredentials, readAt: Stamp): void {
      const leftMs = value.expires_at ? Date.parse(value.expires_at) - now() : Number.POSITIVE_INFINITY;
      const ttlMs = Math.min(options.ttlMs, leftMs - windowFor(leftMs));
      cache.set(key, value, { ttlMs, tags: [value.id], since: readAt });
    },
    invalidate: (id: string): void => cache.invalidate(id),
    clear: (): void => cache.clear(),
  };
}

export type CredentialCache = ReturnType<typeof createCredentialCache>;
