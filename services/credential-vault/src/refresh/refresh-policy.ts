import type { RefreshFailure } from '../db/connection-model.js';

/** With force_refresh false, a token is refreshed only when it expires within this window. */
export const REFRESH_WINDOW_MS = 15 * 60 * 1000;
/** After a failed refresh, fetches answer 424 without trying again for this long. */
export const BACKOFF_MS = 30 * 1000;
/** Failures on this many separate days mean the credentials are beyond repair. */
export const EXHAUSTED_AFTER_DAYS = 3;

/** The credential types whose token the vault can renew. */
export const REFRESHABLE = new Set(['OAUTH2', 'OAUTH2_CC', 'JWT', 'APP']);

export function needsRefresh(type: string, expiresAt: Date | null, now: number, force: boolean): boolean {
  if (!REFRESHABLE.has(type)) return false;
  if (force) return true;
  // A JWT without a token yet is made on first fetch.
  if (expiresAt === null) return type === 'JWT' || type === 'OAUTH2_CC';
  return expiresAt.getTime() - now <= REFRESH_WINDOW_MS;
}

const dayOf = (at: Date) => at.toISOString().slice(0, 10);

export function recordFailure(
  previous: RefreshFailure | null,
  at: Date,
  error: RefreshFailure['last_error'],
): RefreshFailure {
  const days = new Set(previous?.days ?? []);
  days.add(dayOf(at));
  return { days: [...days].sort().slice(-10), last_at: at, backoff_until: new Date(at.getTime() + BACKOFF_MS), last_error: error };
}

export function isExhausted(failure: RefreshFailure | null): boolean {
  return (failure?.days.length ?? 0) >= EXHAUSTED_AFTER_DAYS;
}

export function inBackoff(failure: RefreshFailure | null, now: number): boolean {
  return failure !== null && new Date(failure.backoff_until).getTime() > now;
}
