/**
 * Failed authentications per client address, in memory and bounded. An address that fails
 * `limit` times within `windowMs` is refused (429) until its window ends, before any digest or
 * database read: guessing keys, or flooding the gateway with unknown ones, costs a map lookup.
 * Keys already known to be valid are admitted before this is asked (see authenticate-key.ts),
 * so a legitimate client behind the same address keeps working.
 */
export interface AuthFailureOptions {
  limit: number;
  windowMs: number;
  /** At most this many addresses are tracked; the oldest window is forgotten first. */
  maxAddresses: number;
  now?: () => number;
}

interface Window {
  startedAt: number;
  failures: number;
}

export function createAuthFailureLimiter(options: AuthFailureOptions) {
  const now = options.now ?? Date.now;
  // Insertion order = order of first failure in a window: the first entry is the oldest.
  const windows = new Map<string, Window>();

  function current(address: string, at: number): Window | undefined {
    const window = windows.get(address);
    if (window && at - window.startedAt >= options.windowMs) {
      windows.delete(address);
      return undefined;
    }
    return window;
  }

  return {
    /** Seconds until `address` may try again; 0 while it may. */
    retryAfter(address: string): number {
      const at = now();
      const window = current(address, at);
      if (!window || window.failures < options.limit) return 0;
      return Math.max(1, Math.ceil((window.startedAt + options.windowMs - at) / 1000));
    },
    record(address: string): void {
      const at = now();
      const window = current(address, at);
      if (window) {
        window.failures++;
        return;
      }
      if (windows.size >= options.maxAddresses) {
        const oldest = windows.keys().next().value;
        if (oldest !== undefined) windows.delete(oldest);
      }
      windows.set(address, { startedAt: at, failures: 1 });
    },
    /** Takes back one failure charged before a lookup that found a valid key, or could not be made. */
    forgive(address: string): void {
      const window = windows.get(address);
      if (window && window.failures > 0) window.failures--;
    },
    size: () => windows.size,
  };
}

export type AuthFailureLimiter = ReturnType<typeof createAuthFailureLimiter>;
