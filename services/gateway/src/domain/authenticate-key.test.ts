import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { keyFormat, generateApiKeySecret } from './api-key-secrets.js';
import { createAuthFailureLimiter } from './auth-failures.js';
import { createKeyAuthenticator } from './authenticate-key.js';
import { createKeyCache, type StoredKey } from './key-cache.js';

const stored: StoredKey = { _id: 'key_1', environment_id: 'env_1', account_id: 'acc_1', scopes: 'full_access' };
const BOOTSTRAP = 'an operator-chosen bootstrap secret of any shape!';

/** A key cache over counting deps: every digest and every read is recorded. */
function setup(valid: readonly string[], limit = 3, database = { down: false }) {
  const digests: string[] = [];
  const reads: string[] = [];
  const keys = createKeyCache(
    {
      digestOf: (secret) => (digests.push(secret), `d:${secret}`),
      findByDigest: async (digest) => {
        reads.push(digest);
        if (database.down) throw new AppError('service_unavailable', 'The database did not answer');
        return valid.some((secret) => `d:${secret}` === digest) ? stored : null;
      },
    },
    { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 10, maxUnknown: 10 },
  );
  const failures = createAuthFailureLimiter({ limit, windowMs: 60_000, maxAddresses: 100 });
  const authenticate = createKeyAuthenticator({ keys, isWellFormed: keyFormat(BOOTSTRAP), failures });
  return { digests, reads, authenticate, failures };
}

describe('key authentication: the order of checks', () => {
  it('never digests or reads for a malformed secret', async () => {
    const { digests, reads, authenticate } = setup([], 100);
    for (const secret of ['x', 'lk_sk_short', `lk_sk_${'a'.repeat(42)}!`, 'Bearer', 'a'.repeat(64), `${BOOTSTRAP}x`]) {
      expect(await authenticate(secret, () => '192.0.2.1')).toEqual({ unknown: true });
    }
    expect(digests).toEqual([]);
    expect(reads).toEqual([]);
  });

  it('digests and reads a well-formed secret and the configured bootstrap secret once', async () => {
    const key = generateApiKeySecret();
    const { reads, authenticate } = setup([key, BOOTSTRAP]);
    expect(await authenticate(key, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
    expect(await authenticate(BOOTSTRAP, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
    expect(authenticate(key, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
    expect(reads).toHaveLength(2);
  });

  it('refuses an address over its failure limit before any digest, while valid keys from it still pass', async () => {
    const key = generateApiKeySecret();
    const { digests, reads, authenticate } = setup([key], 3);
    await authenticate(key, () => '192.0.2.1');
    for (let i = 0; i < 3; i++) expect(await authenticate(generateApiKeySecret(), () => '192.0.2.1')).toEqual({ unknown: true });
    const before = { digests: digests.length, reads: reads.length };
    const refused = await authenticate(generateApiKeySecret(), () => '192.0.2.1');
    expect(refused).toEqual({ blocked: expect.any(Number) });
    expect((refused as { blocked: number }).blocked).toBeGreaterThan(0);
    expect({ digests: digests.length, reads: reads.length }).toEqual(before);
    expect(authenticate(key, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
    expect(await authenticate(generateApiKeySecret(), () => '192.0.2.2')).toEqual({ unknown: true });
  });

  it('does not count a lookup the database could not answer as a failed authentication', async () => {
    const key = generateApiKeySecret();
    const database = { down: true };
    const { authenticate } = setup([key], 3, database);
    for (let i = 0; i < 3; i++) await expect(authenticate(key, () => '192.0.2.1')).rejects.toMatchObject({ code: 'service_unavailable' });
    database.down = false;
    // The database is back: the address did nothing wrong, and its valid key passes.
    expect(await authenticate(key, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
  });

  it('gives a burst of concurrent guesses no more reads than the limit', async () => {
    const key = generateApiKeySecret();
    const { reads, authenticate } = setup([key], 3);
    const checks = await Promise.all(Array.from({ length: 20 }, () => authenticate(generateApiKeySecret(), () => '192.0.2.1')));
    expect(reads).toHaveLength(3);
    expect(checks.filter((check) => 'blocked' in check)).toHaveLength(17);
    // Valid keys looked up under the limit are forgiven: they do not count against the address.
    const fresh = setup([key], 2);
    for (let i = 0; i < 5; i++) {
      fresh.authenticate(key, () => '192.0.2.1', {});
      await fresh.authenticate(key, () => '192.0.2.1');
    }
    expect(fresh.failures.retryAfter('192.0.2.1')).toBe(0);
  });

  it('keeps unknown secrets apart, so a flood never evicts a valid key', async () => {
    const key = generateApiKeySecret();
    const { reads, authenticate } = setup([key], 1_000);
    await authenticate(key, () => '192.0.2.1');
    for (let i = 0; i < 50; i++) await authenticate(generateApiKeySecret(), () => '192.0.2.1');
    const before = reads.length;
    expect(authenticate(key, () => '192.0.2.1')).toMatchObject({ key: { keyId: 'key_1' } });
    expect(reads).toHaveLength(before);
  });
});

describe('auth failure limiter', () => {
  it('opens again after the window and tracks a bounded number of addresses', () => {
    let now = 0;
    const failures = createAuthFailureLimiter({ limit: 2, windowMs: 10_000, maxAddresses: 3, now: () => now });
    failures.record('a');
    failures.record('a');
    expect(failures.retryAfter('a')).toBe(10);
    now = 10_000;
    expect(failures.retryAfter('a')).toBe(0);
    for (const address of ['b', 'c', 'd', 'e']) failures.record(address);
    expect(failures.size()).toBeLessThanOrEqual(3);
  });
});
