import { expandScopes, type KeyScopes, type Scope } from '@latchkey/contracts';

/** What a request needs to know about its key, resolved from memory on the hot path. */
export interface ResolvedKey {
  keyId: string;
  environmentId: string;
  accountId: string;
  scopes: ReadonlySet<Scope>;
}

export interface StoredKey {
  _id: string;
  environment_id: string;
  account_id: string;
  scopes: KeyScopes;
}

export interface KeyCacheDeps {
  findByDigest(digest: string): Promise<StoredKey | null>;
  now?: () => number;
}

export interface KeyCacheOptions {
  /** A safety net only: revocations arrive by broadcast within milliseconds. */
  ttlMs: number;
  /** How long an unknown digest is remembered, so a flood of bad keys costs no database reads. */
  negativeTtlMs: number;
  maxEntries: number;
}

interface Entry {
  key: ResolvedKey | null;
  expiresAt: number;
}

/**
 * In-process cache of API keys by digest. Misses for one digest share one database read.
 * `invalidate` (on the `gateway.api_key.changed` broadcast) and `clear` (after a NATS
 * reconnect, when broadcasts may have been missed) keep every replica within a second of a
 * revocation.
 */
export function createKeyCache(deps: KeyCacheDeps, options: KeyCacheOptions) {
  const now = deps.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const pending = new Map<string, Promise<ResolvedKey | null>>();
  let generation = 0;

  async function load(digest: string): Promise<ResolvedKey | null> {
    const startedIn = generation;
    const stored = await deps.findByDigest(digest);
    const key = stored
      ? { keyId: stored._id, environmentId: stored.environment_id, accountId: stored.account_id, scopes: expandScopes(stored.scopes) }
      : null;
    // An invalidation that arrived while we read may concern this very key: do not cache.
    if (startedIn === generation) {
      if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(digest, { key, expiresAt: now() + (key ? options.ttlMs : options.negativeTtlMs) });
    }
    return key;
  }

  return {
    resolve(digest: string): ResolvedKey | null | Promise<ResolvedKey | null> {
      const entry = entries.get(digest);
      if (entry && entry.expiresAt > now()) return entry.key;
      let inFlight = pending.get(digest);
      if (!inFlight) {
        inFlight = load(digest).finally(() => pending.delete(digest));
        pending.set(digest, inFlight);
      }
      return inFlight;
    },
    invalidate(digest: string): void {
      generation++;
      entries.delete(digest);
    },
    clear(): void {
      generation++;
      entries.clear();
    },
    size: () => entries.size,
  };
}

export type KeyCache = ReturnType<typeof createKeyCache>;
