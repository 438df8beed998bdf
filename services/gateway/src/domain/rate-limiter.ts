import { AppError } from '@latchkey/errors';

/**
 * Per-account fixed-window rate limit with one budget shared by every gateway replica.
 *
 * The window's count lives in NATS KV, but no request touches it: a replica reserves a slice of
 * the remaining budget with one compare-and-set and spends it locally. Reservations never
 * exceed the limit, so replicas together never admit more than the limit; slices shrink as the
 * budget drains, so little is stranded in a replica that stops receiving traffic.
 */
export interface WindowStore {
  get(key: string): Promise<{ value: { reserved: number }; revision: number } | null>;
  create(key: string, value: { reserved: number }): Promise<number | null>;
  update(key: string, value: { reserved: number }, revision: number): Promise<number | null>;
}

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** Best knowledge of what is left in the window, across replicas. */
  remaining: number;
  /** Unix time (seconds) when the window ends. */
  resetAt: number;
  /** Seconds to wait when refused. */
  retryAfter: number;
}

interface AccountWindow {
  start: number;
  tokens: number;
  knownReserved: number;
  exhausted: boolean;
  reserving: Promise<void> | undefined;
}

export interface RateLimiterOptions {
  limit: number;
  windowMs: number;
  /** Upper bound of one reservation, as a fraction of the limit. */
  maxSliceFraction?: number;
}

export function createRateLimiter(deps: { store: WindowStore; now?: () => number }, options: RateLimiterOptions) {
  const now = deps.now ?? Date.now;
  const { limit, windowMs } = options;
  const maxSlice = Math.max(1, Math.floor(limit * (options.maxSliceFraction ?? 0.1)));
  const windows = new Map<string, AccountWindow>();

  function windowOf(accountId: string, start: number): AccountWindow {
    let window = windows.get(accountId);
    if (!window || window.start !== start) {
      window = { start, tokens: 0, knownReserved: 0, exhausted: false, reserving: undefined };
      windows.set(accountId, window);
    }
    return window;
  }

  async function reserve(accountId: string, window: AccountWindow): Promise<void> {
    const key = `${accountId}.${window.start}`;
    for (let attempt = 0; attempt < 50; attempt++) {
      const entry = await deps.store.get(key);
      const reserved = entry?.value.reserved ?? 0;
      if (reserved >= limit) {
        window.knownReserved = reserved;
        window.exhausted = true;
        return;
      }
      const slice = Math.max(1, Math.min(maxSlice, Math.ceil((limit - reserved) / 10)));
      const next = { reserved: reserved + slice };
      const revision = entry ? await deps.store.update(key, next, entry.revision) : await deps.store.create(key, next);
      if (revision !== null) {
        window.tokens += slice;
        window.knownReserved = next.reserved;
        return;
      }
      // Another replica reserved first: read again.
    }
    throw new AppError('service_unavailable', 'The rate-limit budget is too contended to reserve; retry shortly');
  }

  async function takeSlow(accountId: string, window: AccountWindow): Promise<RateLimitDecision> {
    for (;;) {
      if (window.tokens > 0) {
        window.tokens--;
        return decision(window, true);
      }
      if (window.exhausted) return decision(window, false);
      // One reservation at a time per account; concurrent requests wait for it and retry.
      window.reserving ??= reserve(accountId, window).finally(() => {
        window.reserving = undefined;
      });
      await window.reserving;
    }
  }

  function decision(window: AccountWindow, allowed: boolean): RateLimitDecision {
    const end = window.start + windowMs;
    return {
      allowed,
      limit,
      remaining: Math.max(0, limit - window.knownReserved + window.tokens),
      resetAt: Math.ceil(end / 1000),
      retryAfter: Math.max(1, Math.ceil((end - now()) / 1000)),
    };
  }

  return {
    limit,
    /**
     * Spends one request of the account's budget: synchronously while this replica holds
     * reserved tokens (the hot path), otherwise after reserving more. Throws `service_unavailable`
     * if the shared store cannot be reached.
     */
    take(accountId: string): RateLimitDecision | Promise<RateLimitDecision> {
      const start = Math.floor(now() / windowMs) * windowMs;
      const window = windowOf(accountId, start);
      if (window.tokens > 0) {
        window.tokens--;
        return decision(window, true);
      }
      return takeSlow(accountId, window);
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
