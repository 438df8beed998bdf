/**
 * Connections this replica has seen exist, so that a hot action does not ask the vault each
 * time. `connection.deleted` (followed live, not durably) drops an entry at once; a replica
 * that lost NATS forgets everything; entries also age out.
 */
export function createKnownConnections(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const seen = new Map<string, number>();
  const keyOf = (environmentId: string, providerConfigKey: string, connectionId: string) => `${environmentId}\u0000${providerConfigKey}\u0000${connectionId}`;
  return {
    has(environmentId: string, providerConfigKey: string, connectionId: string): boolean {
      const key = keyOf(environmentId, providerConfigKey, connectionId);
      const until = seen.get(key);
      if (until === undefined) return false;
      if (until > now()) return true;
      seen.delete(key);
      return false;
    },
    add(environmentId: string, providerConfigKey: string, connectionId: string): void {
      if (seen.size >= options.maxEntries) seen.delete(seen.keys().next().value!);
      seen.set(keyOf(environmentId, providerConfigKey, connectionId), now() + options.ttlMs);
    },
    forget(environmentId: string, providerConfigKey: string, connectionId: string): void {
      seen.delete(keyOf(environmentId, providerConfigKey, connectionId));
    },
    clear: () => seen.clear(),
  };
}

export type KnownConnections = ReturnType<typeof createKnownConnections>;
