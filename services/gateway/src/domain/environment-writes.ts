import { writesOneAtATime, type KvLocks } from '@latchkey/bus';
import type { EnvironmentRepo } from '../db/environment-repo.js';

/**
 * One write at a time to each environment, across every gateway replica, as the vault does for
 * connections: FerretDB writes an updated document back whole, so a settings change meeting a
 * signing-key rotation lost one of them, and two rotations at once (each reading the keys, then
 * writing its list) kept one new key while both callers were shown theirs. Each write holds the
 * environment's key in the `environment_locks` KV bucket (one holder, renewed while it writes; the
 * short TTL frees a dead holder's key). A starting replica's writes too: its reseal at rest wrote
 * back the signing keys it had read over a rotation made meanwhile, and its bootstrap mark could.
 * A write whose key is no longer surely held (its replica stalled past the TTL, or could not renew
 * it) is not sent, or, if under way, answered service_unavailable: the caller tries again.
 */
export function serializedEnvironmentWrites(repo: EnvironmentRepo, locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, options: { waitMs?: number } = {}): EnvironmentRepo {
  const alone = writesOneAtATime(locks, 'environment', 'Another change to this environment is still under way; try again', options.waitMs);
  return {
    ...repo,
    update: (id, patch) => alone(id, () => repo.update(id, patch)),
    rotateSigningKeys: (id, at) => alone(id, () => repo.rotateSigningKeys(id, at)),
    markBootstrapKey: (id, digest) => alone(id, () => repo.markBootstrapKey(id, digest)),
    sealOne: (id) => alone(id, () => repo.sealOne(id)),
    sealAtRest: () => repo.sealAtRest({ seal: (id) => alone(id, () => repo.sealOne(id)) }),
  };
}
