/**
 * Remembers when each key was last used and writes it out coarsely: at most once per key per
 * flush interval and replica, never once per request.
 */
export function createLastUsedTracker(deps: { touch(keyId: string, at: Date): Promise<void>; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const pending = new Map<string, number>();

  return {
    record(keyId: string): void {
      pending.set(keyId, now());
    },
    /** Writes what accumulated since the last flush. */
    async flush(): Promise<void> {
      const batch = [...pending];
      pending.clear();
      await Promise.all(batch.map(([keyId, at]) => deps.touch(keyId, new Date(at))));
    },
  };
}

export type LastUsedTracker = ReturnType<typeof createLastUsedTracker>;
