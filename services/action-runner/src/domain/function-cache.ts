import type { FunctionDescriptionWire, FunctionType } from '@latchkey/contracts';

export interface CachedFunction {
  version: number;
  description: FunctionDescriptionWire;
  bundle: string;
}

/**
 * Deployed functions a replica has fetched, so that a hot action costs no request to the
 * sync-scheduler. A deploy broadcasts `functions.deployment.changed` and every replica drops
 * that integration's entries; a fetch that began before the drop is not stored (generation).
 */
export function createFunctionCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const entries = new Map<string, { fn: CachedFunction; until: number }>();
  const generations = new Map<string, number>();
  let epoch = 0;
  const integrationKey = (environmentId: string, providerConfigKey: string) => `${environmentId}\u0000${providerConfigKey}`;
  const keyOf = (environmentId: string, providerConfigKey: string, type: FunctionType, name: string) =>
    `${integrationKey(environmentId, providerConfigKey)}\u0000${type}\u0000${name}`;

  return {
    generation: (environmentId: string, providerConfigKey: string) => `${epoch}:${generations.get(integrationKey(environmentId, providerConfigKey)) ?? 0}`,
    get(environmentId: string, providerConfigKey: string, type: FunctionType, name: string): CachedFunction | undefined {
      const key = keyOf(environmentId, providerConfigKey, type, name);
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.until <= now()) {
        entries.delete(key);
        return undefined;
      }
      return entry.fn;
    },
    set(environmentId: string, providerConfigKey: string, type: FunctionType, name: string, fn: CachedFunction, readAtGeneration: string): void {
      if (this.generation(environmentId, providerConfigKey) !== readAtGeneration) return;
      if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(keyOf(environmentId, providerConfigKey, type, name), { fn, until: now() + options.ttlMs });
    },
    invalidate(environmentId: string, providerConfigKey: string): void {
      const prefix = `${integrationKey(environmentId, providerConfigKey)}\u0000`;
      generations.set(integrationKey(environmentId, providerConfigKey), (generations.get(integrationKey(environmentId, providerConfigKey)) ?? 0) + 1);
      for (const key of entries.keys()) if (key.startsWith(prefix)) entries.delete(key);
    },
    clear(): void {
      epoch++;
      entries.clear();
    },
  };
}

export type FunctionCache = ReturnType<typeof createFunctionCache>;
