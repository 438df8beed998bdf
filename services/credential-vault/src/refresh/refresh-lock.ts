import { randomUUID } from 'node:crypto';
import type { JsonKv } from '@latchkey/bus';

/** One holding of a connection's refresh lock: the KV revision it last wrote is the proof. */
export interface HeldLock {
  readonly key: string;
  readonly owner: string;
  revision: number;
}

/**
 * The per-connection refresh lock in NATS KV. Every step is a compare-and-set on the key's
 * revision, so a holder that was paused past the TTL (and whose key expired, or was taken by
 * another replica) finds out instead of acting as the owner:
 * - `acquire` creates the key only if absent;
 * - `renew` rewrites it only at the revision this holding last wrote, which restarts the TTL:
 *   true means nobody else can hold it for a full TTL from now;
 * - `release` deletes it only at that revision, never another holder's lock.
 */
export function createRefreshLocks(kv: JsonKv<{ owner: string }>) {
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

export type RefreshLocks = ReturnType<typeof createRefreshLocks>;
