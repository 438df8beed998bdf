import { randomUUID } from 'node:crypto';
import { AppError } from '@latchkey/errors';
import type { JsonKv } from './kv.js';

/** One holding of a lock: the KV revision it last wrote is the proof. */
export interface HeldLock {
  readonly key: string;
  readonly owner: string;
  revision: number;
}

/**
 * Locks in a NATS KV bucket whose entries expire (a holder that dies frees its lock after the
 * bucket's TTL). Every step is a compare-and-set on the key's revision, so a holder that was
 * paused past the TTL (and whose key expired, or was taken by another replica) finds out instead
 * of acting as the owner:
 * - `acquire` creates the key only if absent;
 * - `renew` rewrites it only at the revision this holding last wrote, which restarts the TTL:
 *   true means nobody else can hold it for a full TTL from now;
 * - `release` deletes it only at that revision, never another holder's lock.
 */
export function createKvLocks(kv: JsonKv<{ owner: string }>) {
  return {
    async acquire(key: string): Promise<HeldLock | null> {
      // A new owner per holding: two holdings by one replica are told apart too.
      const owner = randomUUID();
      const revision = await kv.create(key, { owner });
      return revision === null ? null : { key, owner, revision };
    },
    async renew(lock: HeldLock): Promise<boolean> {
      const revision = await kv.update(lock.key, { owner: lock.owner }, lock.revision);
      if (revision === null) return false;
      lock.revision = revision;
      return true;
    },
    async release(lock: HeldLock): Promise<boolean> {
      return kv.delete(lock.key, lock.revision);
    },
    async isHeld(key: string): Promise<boolean> {
      return (await kv.get(key)) !== null;
    },
  };
}

export type KvLocks = ReturnType<typeof createKvLocks>;

/** A lock key for a document id: KV keys take letters, digits, `-` and `_` (and `.` between tokens). */
export const kvLockKey = (prefix: string, id: string) => `${prefix}_${id.replace(/[^A-Za-z0-9_-]/g, '_')}`;

export interface OneAtATimeOptions {
  /** How long `work` waits for the holder before it; past it, service_unavailable and nothing done. */
  waitMs: number;
  /** The error's message when the wait runs out (what was busy, for the caller). */
  busy: string;
  /**
   * How often the holder renews its key while `work` runs, well inside the bucket's TTL: the TTL
   * can then be short (a holder that dies frees its key within it) and still never expire under
   * a write that takes longer (a FerretDB write under load, a bucket electing its leader).
   */
  renewEveryMs: number;
}

const POLL_MS = 5;

/**
 * The TTL of a bucket of write keys, and how often `oneAtATime` renews a key it holds: a replica
 * killed mid-write holds up that document's writes for at most the TTL, and its key is renewed
 * three times within it.
 */
export const WRITE_KEYS = { ttlMs: 6_000, renewEveryMs: 2_000 } as const;

/**
 * Runs `work` while holding `key`, across every replica that locks the same key: for writes
 * that must not overlap on a database that applies an update by reading and writing back the
 * whole document (FerretDB), where a conditional update is not atomic either.
 */
export async function oneAtATime<T>(locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, key: string, work: () => Promise<T>, options: OneAtATimeOptions): Promise<T> {
  const deadline = Date.now() + options.waitMs;
  for (let attempt = 0; ; attempt += 1) {
    const lock = await locks.acquire(key);
    if (lock !== null) {
      // One renewal at a time, and none left in flight at the release (which needs the revision
      // the last renewal wrote). A renewal that fails (the key expired, or the bucket is electing
      // a leader) leaves the work to finish: a write under way cannot be taken back.
      let renewing: Promise<unknown> = Promise.resolve();
      const renewals = setInterval(() => {
        renewing = renewing.then(() => locks.renew(lock)).catch(() => undefined);
      }, options.renewEveryMs);
      try {
        return await work();
      } finally {
        clearInterval(renewals);
        await renewing;
        await locks.release(lock).catch(() => undefined);
      }
    }
    if (Date.now() >= deadline) throw new AppError('service_unavailable', options.busy);
    // Spread out, so that the writers queued behind one do not all ask again at the same moment.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * (1 + Math.random() * Math.min(attempt, 8))));
  }
}

/**
 * Runs each write under its document's key, `<prefix>_<id>`, with the write keys' renewal, waiting
 * up to `waitMs` for the writes before it (then `service_unavailable` with `busy`, nothing done):
 * what a service wraps its repository's writes in when its database may lose concurrent updates.
 */
export function writesOneAtATime(locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, prefix: string, busy: string, waitMs = 10_000) {
  const options = { waitMs, busy, renewEveryMs: WRITE_KEYS.renewEveryMs };
  return <T>(id: string, write: () => Promise<T>): Promise<T> => oneAtATime(locks, kvLockKey(prefix, id), write, options);
}
