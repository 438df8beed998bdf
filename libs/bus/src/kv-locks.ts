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
  /** The TTL of the key's bucket: how long after its last renewal the key may be someone else's. */
  ttlMs: number;
}

/**
 * What `work` is told of the key it runs under. A holder that stalled past the TTL (a long GC
 * pause, a blocked event loop) or could not renew meanwhile (the bucket electing its leader) may
 * have lost its key to another replica, which may be writing the same document: `held()` is
 * false from then on, by this process's own clock, with no round trip to ask.
 */
export interface Holding {
  /**
   * True while the key is surely still this work's: no renewal was refused, and the last one that
   * succeeded (or the acquire) was sent less than the TTL ago, less half a renewal period, the
   * time a write checked at the last moment has to land.
   */
  held(): boolean;
  /** Throws `service_unavailable` (nothing written; retryable) unless `held()`: right before a write. */
  assertHeld(): void;
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
 * whole document (FerretDB), where a conditional update is not atomic either. `work` checks its
 * `Holding` before each write; should the key be lost by the time `work` is done, what it did
 * may have met another holder's writes, and `oneAtATime` throws `service_unavailable` instead
 * of its result (a write already sent cannot be taken back: the caller is told to try again).
 */
export async function oneAtATime<T>(
  locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>,
  key: string,
  work: (holding: Holding) => Promise<T>,
  options: OneAtATimeOptions,
): Promise<T> {
  const deadline = Date.now() + options.waitMs;
  for (let attempt = 0; ; attempt += 1) {
    // Timed from before the ask (the bucket starts the key's TTL at some moment after it), on the
    // monotonic clock (a wall clock set back would stretch the trust).
    const askedAt = performance.now();
    const lock = await locks.acquire(key);
    if (lock !== null) return holdWhile(locks, lock, askedAt, work, options);
    if (Date.now() >= deadline) throw new AppError('service_unavailable', options.busy);
    // Spread out, so that the writers queued behind one do not all ask again at the same moment.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * (1 + Math.random() * Math.min(attempt, 8))));
  }
}

/** Runs `work` under `lock`, acquired at `askedAt`, renewing it meanwhile; then releases it. */
async function holdWhile<T>(
  locks: Pick<KvLocks, 'renew' | 'release'>,
  lock: HeldLock,
  askedAt: number,
  work: (holding: Holding) => Promise<T>,
  options: OneAtATimeOptions,
): Promise<T> {
  const trustMs = options.ttlMs - options.renewEveryMs / 2;
  let trustedUntil = askedAt + trustMs;
  // A renewal refused: the key expired, and may be another holder's. No renewal can undo that.
  let refused = false;
  let done = false;
  const holding: Holding = {
    held: () => !refused && performance.now() < trustedUntil,
    assertHeld() {
      if (!holding.held()) throw lost('before the write; nothing was written');
    },
  };
  // A renewal that fails for now (the bucket electing a leader) leaves the key's fate unknown:
  // the holding stays trusted until its time runs out, and the next renewal may extend it. A
  // success proves the key never lapsed (a compare-and-set on the revision this holding wrote).
  const renew = async () => {
    if (done || refused) return;
    const sentAt = performance.now();
    if (await locks.renew(lock)) trustedUntil = sentAt + trustMs;
    else refused = true;
  };
  // One renewal at a time, none started once the work is done, and none left in flight at the
  // release (which needs the revision the last renewal wrote).
  let renewing: Promise<unknown> = Promise.resolve();
  const renewals = setInterval(() => {
    renewing = renewing.then(renew).catch(() => undefined);
  }, options.renewEveryMs);
  try {
    const result = await work(holding);
    if (!holding.held()) throw lost('while the work ran; what it wrote may or may not have been applied');
    return result;
  } finally {
    done = true;
    clearInterval(renewals);
    await renewing;
    await locks.release(lock).catch(() => undefined);
  }
}

function lost(when: string): AppError {
  return new AppError(
    'service_unavailable',
    `The write key was lost ${when} (this replica stalled past the key's TTL, or could not renew it while its bucket was away); try again`,
  );
}

/**
 * Runs each write under its document's key, `<prefix>_<id>`, with the write keys' renewal, waiting
 * up to `waitMs` for the writes before it (then `service_unavailable` with `busy`, nothing done):
 * what a service wraps its repository's writes in when its database may lose concurrent updates.
 * A write is not sent once its key is no longer surely held (`Holding`); one made of several
 * steps is handed the holding to check before each.
 */
export function writesOneAtATime(locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>, prefix: string, busy: string, waitMs = 10_000) {
  const options = { waitMs, busy, ...WRITE_KEYS };
  return <T>(id: string, write: (holding: Holding) => Promise<T>): Promise<T> =>
    oneAtATime(
      locks,
      kvLockKey(prefix, id),
      async (holding) => {
        // The acquire's answer may have come too late to be trusted (a stall while it was asked).
        holding.assertHeld();
        return write(holding);
      },
      options,
    );
}
