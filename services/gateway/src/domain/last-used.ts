/** Keys whose failed write is kept for the next flush, at most: the rest wait for their next use. */
const MAX_PENDING = 100_000;

/**
 * Remembers when each key was last used and writes it out coarsely: at most once per key per
 * flush interval and replica, never once per request. A write that fails is tried again at the
 * next flush, unless a later use replaced it meanwhile; while the database stays away, what is
 * kept for it is bounded by `maxPending`.
 */
export function createLastUsedTracker(
  deps: { touch(keyId: string, at: Date): Promise<void>; now?: () => number },
  options: { maxPending?: number } = {},
) {
  const now = deps.now ?? Date.now;
  const maxPending = options.maxPending ?? MAX_PENDING;
  const pending = new Map<string, number>();

  /** Puts a use back whose write failed: a later use recorded since wins, a full map drops it. */
  function putBack(keyId: string, at: number): void {
    const later = pending.get(keyId);
    if (later !== undefined) pending.set(keyId, Math.max(later, at));
    else if (pending.size < maxPending) pending.set(keyId, at);
  }

  return {
    record(keyId: string): void {
      pending.set(keyId, now());
    },
    /** Writes what accumulated since the last flush; rejects with the first failure, after keeping what failed. */
    async flush(): Promise<void> {
      const batch = [...pending];
      pending.clear();
      const results = await Promise.allSettled(batch.map(([keyId, at]) => deps.touch(keyId, new Date(at))));
      const failures: unknown[] = [];
      results.forEach((result, index) => {
        if (result.status === 'fulfilled') return;
        const [keyId, at] = batch[index]!;
        putBack(keyId, at);
        failures.push(result.reason);
      });
      if (failures.length > 0) throw failures[0];
    },
  };
}

export type LastUsedTracker = ReturnType<typeof createLastUsedTracker>;
