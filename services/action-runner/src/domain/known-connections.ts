import { createCache } from '@latchkey/cache';

/**
 * Connections this replica has seen exist, so that a hot action does not ask the vault each
 * time. `connection.deleted` (followed live, not durably) drops an entry at once; a replica
 * that lost NATS forgets everything; entries also age out.
 */
export function createKnownConnections(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const seen = createCache<true>(options);
  const keyOf = (environmentId: string, providerConfigKey: string, connectionId: string) => `${environmentId}\u0000${providerConfigKey}\u0000${connectionId}`;
  return {
    has: (environmentId: string, providerConfigKey: string, connectionId: string): boolean => seen.has(keyOf(environmentId, providerConfigKey, connectionId)),
    add: (environmentId: string, providerConfigKey: string, connectionId: string): void => seen.set(keyOf(environmentId, providerConfigKey, connectionId), true),
    forget: (environmentId: string, providerConfigKey: string, connectionId: string): void => seen.delete(keyOf(environmentId, providerConfigKey, connectionId)),
    clear: (): void => seen.clear(),
  };
}

export type KnownConnections = ReturnType<typeof createKnownConnections>;
