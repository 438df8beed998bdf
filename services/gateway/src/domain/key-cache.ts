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
  const unknown = new Map<string, Entry>();
  const lookupByDigest = new Map<string, string>();
  // Per keep-alive connection: the last secret seen and its entry, so a client that sends the
  // same key on every request skips even the hash. Held weakly: it goes with the socket.
  const lastOnConnection = new WeakMap<object, { secret: string; entry: Entry; generation: number }>();
  const pending = new Map<string, Promise<ResolvedKey | null>>();
  let generation = 0;

  function forget(lookup: string): void {
    unknown.delete(lookup);
    const entry = entries.get(lookup);
    if (!entry) return;
    entries.delete(lookup);
    lookupByDigest.delete(entry.digest);
  }

  /** The live entry for a lookup hash, known or unknown. */
  function find(lookup: string): Entry | undefined {
    const entry = entries.get(lookup) ?? unknown.get(lookup);
    return entry && entry.expiresAt > now() ? entry : undefined;
  }

  function remembered(secret: string, connection: object | undefined): Entry | undefined {
    const last = connection && lastOnConnection.get(connection);
    if (last && last.secret === secret && last.generation === generation && last.entry.expiresAt > now()) return last.entry;
    const entry = find(hash('sha256', secret, 'base64url'));
    if (entry && connection) lastOnConnection.set(connection, { secret, entry, generation });
    return entry;
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
      if (key) {
        if (entries.size >= options.maxEntries) forget(entries.keys().next().value as string);
        entries.set(lookup, { key, digest, expiresAt: now() + options.ttlMs });
        lookupByDigest.set(digest, lookup);
      } else {
        if (unknown.size >= options.maxUnknown) unknown.delete(unknown.keys().next().value as string);
        unknown.set(lookup, { key, digest, expiresAt: now() + options.negativeTtlMs });
      }
    }
    return key;
  }

  return {
    /**
     * The key behind a secret: synchronously from memory on a hit, else after one read.
     * `connection` (the request's socket) lets repeated requests on one connection skip the hash.
     */
    /**
     * From memory only: the key (valid), null (remembered as unknown), or undefined (not in
     * memory: only `resolve` can tell). Never digests or reads.
     */
    peek(secret: string, connection?: object): ResolvedKey | null | undefined {
      return remembered(secret, connection)?.key;
    },
    /** The key behind a secret: synchronously from memory on a hit, else after one read. */
    resolve(secret: string, connection?: object): ResolvedKey | null | Promise<ResolvedKey | null> {
      const entry = remembered(secret, connection);
      if (entry) return entry.key;
      const lookup = hash('sha256', secret, 'base64url');
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
      // A key created under a digest remembered as unknown must not wait out the negative TTL.
      for (const [unknownLookup, entry] of unknown) if (entry.digest === digest) unknown.delete(unknownLookup);
    },
    clear(): void {
      generation++;
      entries.clear();
      unknown.clear();
      lookupByDigest.clear();
    },
    size: () => entries.size,
  };
}

export type KeyCache = ReturnType<typeof createKeyCache>;
