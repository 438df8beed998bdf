import { createCache } from '@latchkey/cache';

/** Known public ids held at once; a forgotten one costs one more read. */
const MAX_KNOWN = 100_000;

/**
 * Which environment public ids exist, remembered so that inbound webhooks (public, and possibly
 * a flood) cost no database read: a known id is kept (environments are never deleted) until
 * less recently used than many others, an unknown one for a few seconds, apart, so that a flood
 * of made-up ids never pushes a real one out.
 */
export function createKnownEnvironments(deps: { exists(publicId: string): Promise<boolean> }, options: { negativeTtlMs: number; maxUnknown: number }) {
  const known = createCache<true>({ maxEntries: MAX_KNOWN });
  const unknown = createCache<true>({ maxEntries: options.maxUnknown, ttlMs: options.negativeTtlMs });
  return {
    async has(publicId: string): Promise<boolean> {
      if (known.has(publicId)) return true;
      if (unknown.has(publicId)) return false;
      const exists = await deps.exists(publicId);
      if (exists) {
        known.set(publicId, true);
        unknown.delete(publicId);
      } else {
        unknown.set(publicId, true);
      }
      return exists;
    },
  };
}

export type KnownEnvironments = ReturnType<typeof createKnownEnvironments>;
