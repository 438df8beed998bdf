import { AppError } from '@latchkey/errors';

/**
 * Per-account fixed-window rate limit with one budget shared by every gateway replica.
 *
 * The window's count lives in NATS KV, but no request touches it: a replica reserves a slice of
 * the remaining budget with one compare-and-set and spends it locally. Reservations never
 * exceed the limit, so replicas together never admit more than the limit; slices shrink as the
 * budget drains, so little is stranded in a replica that stops receiving traffic.
 *
 * A NATS node lost takes the bucket's leader with it for the seconds its copies take to elect
 * another. The limiter rides that out rather than answering 503: a window's first slice is
 * reserved ahead, in the last tenth of the window before (when this replica had traffic in it),
 * so the minute turning needs no round trip then; and a reservation the bucket cannot take is
 * tried again until `unavailableRetryMs` has passed, the requests waiting on it waiting longer.
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
  /**
   * How long a reservation goes on trying while the bucket is unavailable (electing a leader)
   * before the requests waiting on it answer 503; 10 s by default, the request deadline
   * (REQUEST_TIMEOUT_MS) in the gateway, so a NATS outage still answers within it.
   */
  unavailableRetryMs?: number;
}

const RETRY_PAUSE_MS = 250;

export function createRateLimiter(deps: { store: WindowStore; now?: () => number }, options: RateLimiterOptions) {
  const now = deps.now ?? Date.now;
  const { limit, windowMs } = options;
  const maxSlice = Math.max(1, Math.floor(limit * (options.maxSliceFraction ?? 0.1)));
  const unavailableRetryMs = options.unavailableRetryMs ?? 10_000;
  const windows = new Map<string, AccountWindow>();
  /** An account's next window, its first slice reserved before it opens. */
  const upcoming = new Map<string, AccountWindow>();

  const freshWindow = (start: number): AccountWindow => ({ start, tokens: 0, knownReserved: 0, exhausted: false, reserving: undefined });

  /**
   * The window start the accounts were last swept at. Each account has a window here, and one
   * per connect session is a new account: without a sweep, a replica would keep every one it
   * ever saw. On the first request of each window, the accounts not heard from in it go (their
   * windows are over; one that comes back starts afresh, as it would).
   */
  let sweptAt = Number.NEGATIVE_INFINITY;
  function sweep(start: number): void {
    sweptAt = start;
    for (const [accountId, window] of windows) if (window.start < start) windows.delete(accountId);
    for (const [accountId, window] of upcoming) if (window.start < start) upcoming.delete(accountId);
  }

  function windowOf(accountId: string, start: number): AccountWindow {
    if (start > sweptAt) sweep(start);
    let window = windows.get(accountId);
    if (!window || window.start !== start) {
      const ahead = upcoming.get(accountId);
      upcoming.delete(accountId);
      window = ahead?.start === start ? ahead : freshWindow(start);
      windows.set(accountId, window);
    }
    return window;
  }

  /** One reservation at a time per window: requests that need it wait for the one under way. */
  function reserving(accountId: string, window: AccountWindow): Promise<void> {
    window.reserving ??= reserve(accountId, window).finally(() => {
      window.reserving = undefined;
    });
    return window.reserving;
  }

  /** In the last tenth of a window, the next one's first slice (once per account and window). */
  function reserveNextWindow(accountId: string, window: AccountWindow, at: number): void {
    if (at - window.start < windowMs - windowMs / 10) return;
    const start = window.start + windowMs;
    if (upcoming.get(accountId)?.start === start) return;
    const next = freshWindow(start);
    upcoming.set(accountId, next);
    // Its failure is left to the first request of that window, which reserves again.
    reserving(accountId, next).catch(() => undefined);
  }

  /** A store call; while the bucket is unavailable, tried again until `giveUpAt`. */
  async function patiently<T>(call: () => Promise<T>, giveUpAt: number): Promise<T> {
    for (;;) {
      try {
        return await call();
      } catch (error) {
        if (!(error instanceof AppError && error.code === 'service_unavailable') || Date.now() + RETRY_PAUSE_MS > giveUpAt) throw error;
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      }
    }
  }

  async function reserve(accountId: string, window: AccountWindow): Promise<void> {
    const key = `${accountId}.${window.start}`;
    // Wall-clock time, whatever clock the windows follow.
    const giveUpAt = Date.now() + unavailableRetryMs;
    for (let attempt = 0; attempt < 50; attempt++) {
      const entry = await patiently(() => deps.store.get(key), giveUpAt);
      const reserved = entry?.value.reserved ?? 0;
      if (reserved >= limit) {
        window.knownReserved = reserved;
        window.exhausted = true;
        return;
      }
      const slice = Math.max(1, Math.min(maxSlice, Math.ceil((limit - reserved) / 10)));
      const next = { reserved: reserved + slice };
      // A write whose answer was lost may have been stored: the next read shows it, and its
      // slice stays unspent (fewer admitted, never more).
      const revision = await patiently(() => (entry ? deps.store.update(key, next, entry.revision) : deps.store.create(key, next)), giveUpAt);
      if (revision !== null) {
        window.tokens += slice;
        window.knownReserved = next.reserved;
        return;
      }
      // Another replica reserved first: read again.
    }
    throw new AppError('service_unavailable', 'The rate-limit budget is too contended to reserve; retry shortly');
  }

  async function takeSlow(accountId: string, window: AccountWindow, cost: number): Promise<RateLimitDecision> {
    for (;;) {
      if (window.tokens >= cost) {
        window.tokens -= cost;
        return decision(window, true);
      }
      // What is left stays for smaller takes (a budget in bytes refuses a large body, not a small one).
      if (window.exhausted) return decision(window, false);
      // One reservation at a time per account; concurrent requests wait for it and retry.
      await reserving(accountId, window);
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
    /** Accounts this replica holds a window for (its memory): the current window's, and those reserved ahead. */
    tracked: () => windows.size + upcoming.size,
    /**
     * Spends `cost` (one request, by default) of the account's budget: synchronously while this
     * replica holds enough reserved tokens (the hot path), otherwise after reserving more.
     * Throws `service_unavailable` if the shared store cannot be reached within
     * `unavailableRetryMs`.
     */
    take(accountId: string, cost = 1): RateLimitDecision | Promise<RateLimitDecision> {
      const at = now();
      const window = windowOf(accountId, Math.floor(at / windowMs) * windowMs);
      reserveNextWindow(accountId, window, at);
      if (window.tokens >= cost) {
        window.tokens -= cost;
        return decision(window, true);
      }
      if (cost > limit) return decision(window, false);
      return takeSlow(accountId, window, cost);
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
