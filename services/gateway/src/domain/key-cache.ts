import { hash } from 'node:crypto';
import { createCache, type Stamp } from '@latchkey/cache';
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
  /** How long an unknown digest is remembered, so a repeated bad key costs no database reads. */
  negativeTtlMs: number;
  maxEntries: number;
  /**
   * Unknown secrets are remembered apart from known keys, in at most this many entries, so that
   * a flood of random secrets never pushes a valid key out of memory.
   */
  maxUnknown: number;
}

interface Entry {
  key: ResolvedKey | null;
  digest: string;
  /** Read by the per-connection shortcut, which does not go through the cache. */
  expiresAt: number;
}

/**
 * In-process cache of API keys. Entries are found by a plain SHA-256 of the secret (a one-shot
 * hash, cheap enough for every request); the keyed digest is computed only on a miss, to read
 * the database. Misses for one secret share one read. Entries are tagged with the stored digest:
 * `invalidate` (on the `gateway.api_key.changed` broadcast, which names it) and `clear` (after a
 * NATS reconnect, when broadcasts may have been missed) keep every replica within a second of a
 * revocation.
 */
export function createKeyCache(deps: KeyCacheDeps, options: KeyCacheOptions) {
  const now = deps.now ?? Date.now;
  const clock = deps.now ? { now: deps.now } : {};
  const known = createCache<Entry>({ maxEntries: options.maxEntries, ttlMs: options.ttlMs, ...clock });
  const unknown = createCache<Entry>({ maxEntries: options.maxUnknown, ttlMs: options.negativeTtlMs, ...clock });
  // Per keep-alive connection: the last secret seen and its entry, so a client that sends the
  // same key on every request skips even the hash. Held weakly: it goes with the socket. The
  // stamp lapses with any invalidation or clear.
  const lastOnConnection = new WeakMap<object, { secret: string; entry: Entry; stamp: Stamp }>();

  function remembered(secret: string, connection: object | undefined): Entry | undefined {
    const last = connection && lastOnConnection.get(connection);
    if (last && last.secret === secret && last.stamp.current() && last.entry.expiresAt > now()) return last.entry;
    const lookup = hash('sha256', secret, 'base64url');
    const entry = known.get(lookup) ?? unknown.get(lookup);
    if (entry && connection) lastOnConnection.set(connection, { secret, entry, stamp: known.stamp() });
    return entry;
  }

  /** One read; a known key is placed by `known.load`, an unknown one here, apart. */
  async function read(lookup: string, secret: string): Promise<Entry> {
    // Invalidations reach both caches together, so one stamp covers both.
    const since = known.stamp();
    const digest = deps.digestOf(secret);
    const stored = await deps.findByDigest(digest);
    if (stored) {
      const key = { keyId: stored._id, environmentId: stored.environment_id, accountId: stored.account_id, scopes: expandScopes(stored.scopes) };
      return { key, digest, expiresAt: now() + options.ttlMs };
    }
    const entry = { key: null, digest, expiresAt: now() + options.negativeTtlMs };
    unknown.set(lookup, entry, { tags: [digest], since });
    return entry;
  }

  const placeKnown = (entry: Entry) => (entry.key ? { tags: [entry.digest] } : (false as const));

  return {
    /**
     * From memory only: the key (valid), null (remembered as unknown), or undefined (not in
     * memory: only `resolve` can tell). Never digests or reads.
     * `connection` (the request's socket) lets repeated requests on one connection skip the hash.
     */
    peek(secret: string, connection?: object): ResolvedKey | null | undefined {
      return remembered(secret, connection)?.key;
    },
    /** The key behind a secret: synchronously from memory on a hit, else after one read. */
    resolve(secret: string, connection?: object): ResolvedKey | null | Promise<ResolvedKey | null> {
      const entry = remembered(secret, connection);
      if (entry) return entry.key;
      const lookup = hash('sha256', secret, 'base64url');
      const loaded = known.load(lookup, () => read(lookup, secret), { place: placeKnown });
      return loaded instanceof Promise ? loaded.then((found) => found.key) : loaded.key;
    },
    invalidate(digest: string): void {
      known.invalidate(digest);
      // A key created under a digest remembered as unknown must not wait out the negative TTL.
      unknown.invalidate(digest);
    },
    clear(): void {
      known.clear();
      unknown.clear();
    },
    size: () => known.size(),
  };
}

export type KeyCache = ReturnType<typeof createKeyCache>;
