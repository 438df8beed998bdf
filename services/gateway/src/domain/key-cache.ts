import { hash } from 'node:crypto';
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
  /** The keyed digest under which a secret is stored (slow on purpose: only on a miss). */
  digestOf(secret: string): string;
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
  digest: string;
  expiresAt: number;
}

/**
 * In-process cache of API keys. Entries are found by a plain SHA-256 of the secret (a one-shot
 * hash, cheap enough for every request); the keyed digest is computed only on a miss, to read
 * the database. Misses for one secret share one read. `invalidate` (on the
 * `gateway.api_key.changed` broadcast, which names the stored digest) and `clear` (after a NATS
 * reconnect, when broadcasts may have been missed) keep every replica within a second of a
 * revocation.
 */
export function createKeyCache(deps: KeyCacheDeps, options: KeyCacheOptions) {
  const now = deps.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const lookupByDigest = new Map<string, string>();
  // Per keep-alive connection: the last secret seen and its entry, so a client that sends the
  // same key on every request skips even the hash. Held weakly: it goes with the socket.
  const lastOnConnection = new WeakMap<object, { secret: string; entry: Entry; generation: number }>();
  const pending = new Map<string, Promise<ResolvedKey | null>>();
  let generation = 0;

  function forget(lookup: string): void {
    const entry = entries.get(lookup);
    if (!entry) return;
    entries.delete(lookup);
    lookupByDigest.delete(entry.digest);
  }

  async function load(lookup: string, secret: string): Promise<ResolvedKey | null> {
    const startedIn = generation;
    const digest = deps.digestOf(secret);
    const stored = await deps.findByDigest(digest);
    const key = stored
      ? { keyId: stored._id, environmentId: stored.environment_id, accountId: stored.account_id, scopes: expandScopes(stored.scopes) }
      : null;
    // An invalidation that arrived while we read may concern this very key: do not cache.
    if (startedIn === generation) {
      if (entries.size >= options.maxEntries) forget(entries.keys().next().value as string);
      entries.set(lookup, { key, digest, expiresAt: now() + (key ? options.ttlMs : options.negativeTtlMs) });
      lookupByDigest.set(digest, lookup);
    }
    return key;
  }

  return {
    /**
     * The key behind a secret: synchronously from memory on a hit, else after one read.
     * `connection` (the request's socket) lets repeated requests on one connection skip the hash.
     */
    resolve(secret: string, connection?: object): ResolvedKey | null | Promise<ResolvedKey | null> {
      const remembered = connection && lastOnConnection.get(connection);
      if (remembered && remembered.secret === secret && remembered.generation === generation && remembered.entry.expiresAt > now()) {
        return remembered.entry.key;
      }
      const lookup = hash('sha256', secret, 'base64url');
      const entry = entries.get(lookup);
      if (entry && entry.expiresAt > now()) {
        if (connection) lastOnConnection.set(connection, { secret, entry, generation });
        return entry.key;
      }
      let inFlight = pending.get(lookup);
      if (!inFlight) {
        inFlight = load(lookup, secret).finally(() => pending.delete(lookup));
        pending.set(lookup, inFlight);
      }
      return inFlight;
    },
    invalidate(digest: string): void {
      generation++;
      const lookup = lookupByDigest.get(digest);
      if (lookup !== undefined) forget(lookup);
    },
    clear(): void {
      generation++;
      entries.clear();
      lookupByDigest.clear();
    },
    size: () => entries.size,
  };
}

export type KeyCache = ReturnType<typeof createKeyCache>;
