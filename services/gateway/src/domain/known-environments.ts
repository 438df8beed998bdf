/**
 * Which environment public ids exist, remembered so that inbound webhooks (public, and possibly
 * a flood) cost no database read: a known id is kept (environments are never deleted), an
 * unknown one for a few seconds.
 */
export function createKnownEnvironments(deps: { exists(publicId: string): Promise<boolean> }, options: { negativeTtlMs: number; maxUnknown: number }) {
  const known = new Set<string>();
  const unknown = new Map<string, number>();
  return {
    async has(publicId: string): Promise<boolean> {
      if (known.has(publicId)) return true;
      const until = unknown.get(publicId);
      if (until !== undefined && until > Date.now()) return false;
      const exists = await deps.exists(publicId);
      if (exists) {
        known.add(publicId);
        unknown.delete(publicId);
      } else {
        if (unknown.size >= options.maxUnknown) unknown.clear();
        unknown.set(publicId, Date.now() + options.negativeTtlMs);
      }
      return exists;
    },
  };
}

export type KnownEnvironments = ReturnType<typeof createKnownEnvironments>;
