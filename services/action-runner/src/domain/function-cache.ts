import { createCache, type Stamp } from '@latchkey/cache';
import type { FunctionDescriptionWire, FunctionType } from '@latchkey/contracts';

export interface CachedFunction {
  version: number;
  description: FunctionDescriptionWire;
  bundle: string;
}

/**
 * Deployed functions a replica has fetched, so that a hot action costs no request to the
 * sync-scheduler. A deploy broadcasts `functions.deployment.changed` and every replica drops
 * that integration's entries (each is tagged with its integration); a fetch that began before
 * the drop is not stored.
 */
export function createFunctionCache(options: { ttlMs: number; maxEntries: number; maxBytes: number; now?: () => number }) {
  // Bundles weigh up to 768 KiB each: a bound on entries alone would let a replica's heap hold
  // thousands of the largest. Weighed by their text (one byte a character for the ASCII bundles
  // esbuild writes) and what each entry carries besides.
  const { maxBytes, ...rest } = options;
  const cache = createCache<CachedFunction>({ ...rest, maxWeight: { total: maxBytes, weigh: (fn) => fn.bundle.length + 4096 } });
  const integrationKey = (environmentId: string, providerConfigKey: string) => `${environmentId}\u0000${providerConfigKey}`;
  const keyOf = (environmentId: string, providerConfigKey: string, type: FunctionType, name: string) =>
    `${integrationKey(environmentId, providerConfigKey)}\u0000${type}\u0000${name}`;

  return {
    /** Taken before fetching; lapses when the integration is dropped or everything is cleared. */
    generation: (environmentId: string, providerConfigKey: string): Stamp => cache.stamp(integrationKey(environmentId, providerConfigKey)),
    get: (environmentId: string, providerConfigKey: string, type: FunctionType, name: string): CachedFunction | undefined =>
      cache.get(keyOf(environmentId, providerConfigKey, type, name)),
    set(environmentId: string, providerConfigKey: string, type: FunctionType, name: string, fn: CachedFunction, readAtGeneration: Stamp): void {
      cache.set(keyOf(environmentId, providerConfigKey, type, name), fn, { tags: [integrationKey(environmentId, providerConfigKey)], since: readAtGeneration });
    },
    invalidate: (environmentId: string, providerConfigKey: string): void => cache.invalidate(integrationKey(environmentId, providerConfigKey)),
    clear: (): void => cache.clear(),
  };
}

export type FunctionCache = ReturnType<typeof createFunctionCache>;
