import type { AuthFailureLimiter } from './auth-failures.js';
import type { KeyCache, ResolvedKey } from './key-cache.js';

export type KeyCheck = { key: ResolvedKey } | { unknown: true } | { blocked: number };

export interface AuthenticateKeyDeps {
  keys: Pick<KeyCache, 'peek' | 'resolve'>;
  /** Whether a string can be a key at all (format, or the configured bootstrap secret); no I/O. */
  isWellFormed(secret: string): boolean;
  failures: Pick<AuthFailureLimiter, 'retryAfter' | 'record' | 'forgive'>;
}

/**
 * The order of checks for a bearer secret, cheapest first, so that only a well-formed secret
 * from an address in good standing ever costs a keyed digest and a database read:
 *   1. a key known valid in memory is admitted (the hot path: one hash, or none on a kept-alive
 *      connection), whatever its address has done;
 *   2. an address over its failure limit is refused;
 *   3. a malformed secret, or one remembered as unknown, is unknown;
 *   4. only then the digest and the read, charged to the address as a failure before it starts
 *      and forgiven when the key turns out valid, so that a burst of concurrent guesses gets no
 *      more reads than the limit allows.
 * Every unknown answer counts as a failure of the address; a lookup that failed (the database
 * away) does not.
 */
export function createKeyAuthenticator(deps: AuthenticateKeyDeps) {
  const unknown = (address: string): KeyCheck => {
    deps.failures.record(address);
    return { unknown: true };
  };
  /** `clientAddress` is asked only off the hot path: a known key never needs it. */
  return (secret: string, clientAddress: () => string, connection?: object): KeyCheck | Promise<KeyCheck> => {
    const known = deps.keys.peek(secret, connection);
    if (known) return { key: known };
    const address = clientAddress();
    const retryAfter = deps.failures.retryAfter(address);
    if (retryAfter > 0) return { blocked: retryAfter };
    if (known === null || !deps.isWellFormed(secret)) return unknown(address);
    deps.failures.record(address);
    const resolved = deps.keys.resolve(secret, connection);
    const settle = (key: ResolvedKey | null): KeyCheck => {
      if (!key) return { unknown: true };
      deps.failures.forgive(address);
      return { key };
    };
    // A lookup the database could not answer is not the client's failure: its charge goes.
    const outage = (error: unknown): never => {
      deps.failures.forgive(address);
      throw error;
    };
    return resolved instanceof Promise ? resolved.then(settle, outage) : settle(resolved);
  };
}

export type KeyAuthenticator = ReturnType<typeof createKeyAuthenticator>;
