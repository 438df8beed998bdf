import type { JsonKv } from '@latchkey/bus';
import type { SchedulerTick } from '@latchkey/contracts';

/** The lease entry: its holder, and what the holder's last tick did (for operators). */
export interface LeaseEntry {
  owner: string;
  last_tick?: SchedulerTick | null;
}

/**
 * Leadership over one NATS KV key. The holder renews its entry (compare-and-set on the revision
 * it wrote) more often than the bucket's TTL; if it dies, the entry expires and the next replica
 * to try creates it. Anyone whose renewal fails (another wrote meanwhile) stops leading at once.
 */
export interface Lease {
  /** Renews or tries to take the lease, writing `lastTick` into it; says whether this replica holds it now. */
  tick(lastTick?: SchedulerTick | null): Promise<boolean>;
  holding(): boolean;
  /** Gives the lease up (on shutdown), so another replica takes over without waiting for the TTL. */
  release(): Promise<void>;
}

export function createLease(kv: JsonKv<LeaseEntry>, key: string, owner: string): Lease {
  let revision: number | null = null;
  return {
    async tick(lastTick = null) {
      const entry: LeaseEntry = { owner, last_tick: lastTick };
      try {
        if (revision !== null) {
          revision = await kv.update(key, entry, revision);
          if (revision !== null) return true;
        }
        // Not holding: take the key when it is absent (expired, released, never written).
        revision = await kv.create(key, entry);
        return revision !== null;
      } catch (error) {
        // Unsure whether the renewal landed: stop leading; the entry expires if it is still ours.
        revision = null;
        throw error;
      }
    },
    holding: () => revision !== null,
    async release() {
      if (revision === null) return;
      const current = await kv.get(key);
      revision = null;
      // Deleted only at the revision read: a lease that expired and was taken meanwhile stays.
      if (current?.value.owner === owner) await kv.delete(key, current.revision);
    },
  };
}
