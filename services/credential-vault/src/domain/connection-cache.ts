import type { ConnectionDoc } from '../db/connection-model.js';
import type { ConnectionRepo } from '../db/connection-repo.js';

interface Entry {
  doc: ConnectionDoc;
  credentials: Record<string, unknown>;
  expiresAt: number;
}

/**
 * Decrypted connections kept in memory for a short while, so that repeated fetches of one
 * connection cost neither a database read nor a decryption. Every write to a connection, on any
 * vault replica, invalidates it everywhere (`vault.connection.changed`); the TTL only bounds the
 * damage of a missed broadcast. Refresh decisions still run on every fetch, on the cached expiry.
 */
export function createConnectionCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const keyById = new Map<string, string>();
  const keyOf = (environmentId: string, providerConfigKey: string, connectionId: string) => `${environmentId}\u0000${providerConfigKey}\u0000${connectionId}`;
  // Bumped by every invalidation: a read that an invalidation overtook is not cached.
  let generation = 0;

  return {
    get(environmentId: string, providerConfigKey: string, connectionId: string): Entry | undefined {
      const entry = entries.get(keyOf(environmentId, providerConfigKey, connectionId));
      return entry && entry.expiresAt > now() ? entry : undefined;
    },
    generation: () => generation,
    /** Caches what was read, unless an invalidation happened since `readAt` (a generation). */
    set(doc: ConnectionDoc, credentials: Record<string, unknown>, readAt: number): void {
      if (readAt !== generation) return;
      const key = keyOf(doc.environment_id, doc.provider_config_key, doc.connection_id);
      if (entries.size >= options.maxEntries) {
        const oldest = entries.keys().next().value as string;
        const evicted = entries.get(oldest);
        entries.delete(oldest);
        if (evicted) keyById.delete(evicted.doc._id);
      }
      entries.set(key, { doc, credentials, expiresAt: now() + options.ttlMs });
      keyById.set(doc._id, key);
    },
    /** Forgets a connection by its internal id. */
    invalidate(id: string): void {
      generation++;
      const key = keyById.get(id);
      if (key === undefined) return;
      keyById.delete(id);
      entries.delete(key);
    },
    clear(): void {
      generation++;
      entries.clear();
      keyById.clear();
    },
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
    replaceCredentials: (environment, id, version, fields) => after(id, repo.replaceCredentials(environment, id, version, fields)),
    updateAtVersion: (environment, id, version, fields) => after(id, repo.updateAtVersion(environment, id, version, fields)),
    remove: (environment, id) => after(id, repo.remove(environment, id)),
    swapCredentials: (environment, id, previous, next) => after(id, repo.swapCredentials(environment, id, previous, next)),
    recordSyncRun: (environment, id, key, state) => after(id, repo.recordSyncRun(environment, id, key, state)),
  };
}
