import { kvLockKey, writesOneAtATime, type KvLocks } from '@latchkey/bus';
import type { ConnectionRepo } from '../db/connection-repo.js';
import type { IntegrationRepo } from '../db/integration-repo.js';

export interface SerializedWritesOptions {
  /** How long a write waits for the writes before it to finish; past it, service_unavailable. */
  waitMs?: number;
}

/** The lock key of a connection's writes (in `vault_write_locks`, apart from its refresh lock). */
const WRITE_KEY_PREFIX = 'write';
export const writeLockKey = (id: string) => kvLockKey(WRITE_KEY_PREFIX, id);

/**
 * One write at a time to each connection, across every vault replica. FerretDB (the embedded
 * default) applies an update by reading the document and writing it back whole, so two updates
 * of one connection at once lose one of them, whatever fields each sets: a metadata key, a tag,
 * or a refresh's new tokens (and with them a rotated refresh token, which nothing gives back).
 * Its compare-and-set on the credentials version is as weak. Each write here first creates the
 * connection's write key in NATS KV (only if absent: one holder), renewed while the write runs,
 * which the bucket's short TTL frees should its holder die (`WRITE_KEYS`); on MongoDB 7 the key costs two KV calls per write and changes
 * nothing else. Reads take no lock; inserts are decided by the unique `_id`. A holder that stalled
 * past the TTL, or could not renew, may have lost the key to another replica: its write is then
 * not sent, or, if it was already under way, answered service_unavailable (`Holding`). A refresh's
 * store tries again, and its compare-and-set on the credentials version tells whether the first
 * try landed: the rotated tokens are kept either way.
 */
export function serializedConnectionWrites(repo: ConnectionRepo, locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, options: SerializedWritesOptions = {}): ConnectionRepo {
  const alone = writesOneAtATime(locks, WRITE_KEY_PREFIX, 'Another write to this connection is still under way; try again', options.waitMs);

  return {
    ...repo,
    update: (environment, id, fields) => alone(id, () => repo.update(environment, id, fields)),
    stampFetched: (environment, id, at) => alone(id, () => repo.stampFetched(environment, id, at)),
    replaceCredentials: (environment, id, version, fields, unchangedSince) => alone(id, () => repo.replaceCredentials(environment, id, version, fields, unchangedSince)),
    updateAtVersion: (environment, id, version, fields) => alone(id, () => repo.updateAtVersion(environment, id, version, fields)),
    swapCredentials: (environment, id, previous, next) => alone(id, () => repo.swapCredentials(environment, id, previous, next)),
    recordSyncRun: (environment, id, key, state) => alone(id, () => repo.recordSyncRun(environment, id, key, state)),
    markSearchable: (environment, id) => alone(id, () => repo.markSearchable(environment, id)),
    markListed: (environment, id) => alone(id, () => repo.markListed(environment, id)),
    // The backfills' marks are writes to connections that may be in use meanwhile.
    indexLists: () => repo.indexLists({ mark: (environment, id) => alone(id, () => repo.markListed(environment, id)) }),
    indexGrams: (options = {}) => repo.indexGrams({ ...options, mark: (environment, id) => alone(id, () => repo.markSearchable(environment, id)) }),
  };
}

/**
 * The same for integrations: an edit meeting the re-encryption of its client secret, or two
 * replicas giving an older integration its webhook secret at once (each then hands out its own,
 * and the provider's signatures fail against one of them), lost a write on FerretDB.
 *
 * And which connections an integration has changes one change at a time, under its members key
 * (`members_<id>`, apart from its write key, which a rename's own update takes inside it): a
 * connection's insert (the integration read again, then the connection's document stored), a
 * rename (no connection counted, then the new key written) and a deletion's removal of the
 * integration. Without it, an insert that had found the integration landed after a rename had
 * counted none, or after a deletion had swept the connections: a connection under a key no
 * integration held, which the next integration made with that key found as its own.
 */
export function serializedIntegrationWrites(repo: IntegrationRepo, locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, options: SerializedWritesOptions = {}): IntegrationRepo {
  const alone = writesOneAtATime(locks, 'integration', 'Another write to this integration is still under way; try again', options.waitMs);
  const members = writesOneAtATime(locks, 'members', "Another change to this integration's connections is under way; try again", options.waitMs);

  return {
    ...repo,
    holdingMembers: (id, work) => members(id, work),
    update: (environment, id, fields) => alone(id, () => repo.update(environment, id, fields)),
    swapField: (environment, id, field, previous, next) => alone(id, () => repo.swapField(environment, id, field, previous, next)),
    setWebhookSecretIfMissing: (environment, id, sealed) => alone(id, () => repo.setWebhookSecretIfMissing(environment, id, sealed)),
  };
}
