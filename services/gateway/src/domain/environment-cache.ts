import { createCache } from '@latchkey/cache';
import type { EnvironmentDoc } from '../db/environment-model.js';
import type { EnvironmentPatch, EnvironmentRepo } from '../db/environment-repo.js';

export interface EnvironmentCacheOptions {
  /** A safety net only: changes arrive by broadcast within milliseconds. */
  ttlMs: number;
  maxEntries: number;
}

/**
 * Environments by id, held in memory: the authenticated routes that read one (variables,
 * integrations, connect sessions, signing keys for other services) would otherwise read and
 * decrypt it on every request. A replica that changes an environment drops its own copy and
 * `announce`s the change, on which every replica drops theirs (`invalidate`); after a NATS
 * reconnect, when announcements may have been missed, `clear` drops everything. A read that an
 * invalidation overtook is not kept. Callers get a shared object: they must not change it.
 */
export function createEnvironmentCache(
  deps: { repo: Pick<EnvironmentRepo, 'findById' | 'update' | 'rotateSigningKeys'>; announce(environmentId: string): void },
  options: EnvironmentCacheOptions,
) {
  const cache = createCache<{ environment: EnvironmentDoc | null }>({ maxEntries: options.maxEntries, ttlMs: options.ttlMs });
  const { repo, announce } = deps;

  const changed = (environmentId: string) => {
    cache.invalidate(environmentId);
    announce(environmentId);
  };

  return {
    findById: async (id: string) =>
      (
        await cache.load(id, async () => ({ environment: await repo.findById(id) }), {
          tag: id,
          // An unknown id is not kept: environments are created by another replica at any time.
          place: ({ environment }) => (environment ? { tags: [id] } : false),
        })
      ).environment,
    async update(id: string, patch: EnvironmentPatch) {
      try {
        return await repo.update(id, patch);
      } finally {
        changed(id);
      }
    },
    async rotateSigningKeys(id: string, at: Date) {
      try {
        return await repo.rotateSigningKeys(id, at);
      } finally {
        changed(id);
      }
    },
    /** On another replica's announcement. */
    invalidate: (environmentId: string) => cache.invalidate(environmentId),
    /** After a reconnect. */
    clear: () => cache.clear(),
  };
}
