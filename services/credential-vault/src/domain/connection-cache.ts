import { createCache, type Stamp } from '@latchkey/cache';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { ConnectionRepo } from '../db/connection-repo.js';

interface Entry {
  doc: ConnectionDoc;
  credentials: Record<string, unknown>;
}

/**
 * Decrypted connections kept in memory for a short while, so that repeated fetches of one
 * connection cost neither a database read nor a decryption. Every write to a connection, on any
 * vault replica, invalidates it everywhere (`vault.connection.changed`, naming the internal id
 * each entry is tagged with); the TTL only bounds the damage of a missed broadcast. Refresh
 * decisions still run on every fetch, on the cached expiry.
 */
export function createConnectionCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const cache = createCache<Entry>(options);
  const keyOf = (environmentId: string, providerConfigKey: string, connectionId: string) => `${environmentId}\u0000${providerConfigKey}\u0000${connectionId}`;

  return {
    get: (environmentId: string, providerConfigKey: string, connectionId: string): Entry | undefined =>
      cache.get(keyOf(environmentId, providerConfigKey, connectionId)),
    /** Taken before reading; `set` keeps nothing if an invalidation happened since. */
    generation: (): Stamp => cache.stamp(),
    set(doc: ConnectionDoc, credentials: Record<string, unknown>, readAt: Stamp): void {
      cache.set(keyOf(doc.environment_id, doc.provider_config_key, doc.connection_id), { doc, credentials }, { tags: [doc._id], since: readAt });
    },
    /** Forgets a connection by its internal id. */
    invalidate: (id: string): void => cache.invalidate(id),
    clear: (): void => cache.clear(),
  };
}

export type ConnectionCache = ReturnType<typeof createConnectionCache>;

/** Wraps the connection repository so that every write announces the connection as changed. */
export function announcingWrites(repo: ConnectionRepo, changed: (id: string) => void): ConnectionRepo {
  const after = async <T>(id: string, write: Promise<T>): Promise<T> => {
    const result = await write;
    changed(id);
    return result;
  };
  return {
    ...repo,
    update: (environment, id, fields) => after(id, repo.update(environment, id, fields)),
    stampFetched: (environment, id, at) => after(id, repo.stampFetched(environment, id, at)),
    replaceCredentials: (environment, id, version, fields, unchangedSince) => after(id, repo.replaceCredentials(environment, id, version, fields, unchangedSince)),
    updateAtVersion: (environment, id, version, fields) => after(id, repo.updateAtVersion(environment, id, version, fields)),
    remove: (environment, id) => after(id, repo.remove(environment, id)),
    swapCredentials: (environment, id, previous, next) => after(id, repo.swapCredentials(environment, id, previous, next)),
    recordSyncRun: (environment, id, key, state) => after(id, repo.recordSyncRun(environment, id, key, state)),
  };
}
