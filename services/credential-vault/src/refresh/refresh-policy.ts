import type { RefreshFailure } from '../db/connection-model.js';

/** With force_refresh false, a token is refreshed only when it expires within this window. */
export const REFRESH_WINDOW_MS = 15 * 60 * 1000;
/** After a failed refresh, fetches answer 424 without trying again for this long. */
export const BACKOFF_MS = 30 * 1000;
/** Failures on this many separate days mean the credentials are beyond repair. */
export const EXHAUSTED_AFTER_DAYS = 3;

/** The credential types whose token the vault can renew. */
export const REFRESHABLE = new Set(['OAUTH2', 'OAUTH2_CC', 'JWT', 'APP', 'TWO_STEP', 'BILL', 'SIGNATURE']);

/**
 * Types whose token the vault makes or buys from the credentials alone: without an expiry
 * the first fetch gets one. OAUTH2 and APP without an expiry are taken to be long-lived.
 */
const MADE_WHEN_MISSING = new Set(['OAUTH2_CC', 'JWT', 'TWO_STEP', 'BILL', 'SIGNATURE']);

/**
 * Of those, the types whose token is bought from a provider, which may not state how long it
 * lives: such a token, once held, is kept until the provider refuses it (a forced fetch, as the
 * proxy makes after a 401), not bought again on every fetch. A JWT is signed here, always
 * with its expiry.
 */
const BOUGHT = new Set(['OAUTH2_CC', 'TWO_STEP', 'BILL', 'SIGNATURE']);

/** Margin under which a token about to expire counts as expired: it must outlive the call it is handed out for. */
const STILL_VALID_MARGIN_MS = 60_000;
/** The narrowest window: a token is refreshed at the latest this long before it expires. */
const SHORTEST_WINDOW_MS = 2 * STILL_VALID_MARGIN_MS;

/** Whether the credentials hold a token the vault bought (BILL's is its session id). */
function holdsToken(credentials: Record<string, unknown>): boolean {
  const token = credentials['token'] ?? credentials['session_id'];
  return typeof token === 'string' && token !== '';
}

/**
 * Whether a fetch refreshes the token first: forced, or expiring within the window. The window
 * is 15 minutes, or half the token's life when that is shorter (the provider's `expires_in`, in
 * `credentials.raw`, else the time from `obtainedAt`, when the vault asked for the token, to its
 * expiry): a token that lives five minutes is refreshed in its second half, not on every fetch,
 * and never later than two minutes before it expires.
 */
export function needsRefresh(
  type: string,
  expiresAt: Date | null,
  now: number,
  force: boolean,
  credentials: Record<string, unknown> = {},
  obtainedAt: Date | null = null,
): boolean {
  if (!REFRESHABLE.has(type)) return false;
  if (force) return true;
  if (expiresAt === null) return MADE_WHEN_MISSING.has(type) && !(BOUGHT.has(type) && holdsToken(credentials));
  const obtainedLife = obtainedAt === null ? Number.NaN : expiresAt.getTime() - obtainedAt.getTime();
  const lifetimeMs = lifetimeOf(credentials) ?? (obtainedLife > 0 ? obtainedLife : null);
  const window = lifetimeMs === null ? REFRESH_WINDOW_MS : Math.min(REFRESH_WINDOW_MS, Math.max(SHORTEST_WINDOW_MS, lifetimeMs / 2));
  return expiresAt.getTime() - now <= window;
}

/**
 * A token's life as its provider gave it (`expires_in` of the answer kept in `raw`), else as a
 * JWT token says it (`exp` − `iat`: one the vault signed, for one), or null when unknown.
 */
export function lifetimeOf(credentials: Record<string, unknown>): number | null {
  const raw = credentials['raw'];
  const seconds = raw !== null && typeof raw === 'object' ? Number((raw as Record<string, unknown>)['expires_in']) : Number.NaN;
  if (Number.isFinite(seconds) && seconds > 0) return seconds * 1000;
  const claims = typeof credentials['token'] === 'string' ? jwtClaims(credentials['token']) : undefined;
  const life = claims ? Number(claims['exp']) - Number(claims['iat']) : Number.NaN;
  return Number.isFinite(life) && life > 0 ? life * 1000 : null;
}

/** A JWT's claims, read (not verified: only its stated life is taken from them), or undefined. */
function jwtClaims(token: string): Record<string, unknown> | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1]!.length > 8192) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as unknown;
    return claims !== null && typeof claims === 'object' ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a token with this expiry may still be handed out (one without an expiry is not refreshed ahead). */
export function stillValid(expiresAt: Date | null, now: number): boolean {
  return expiresAt !== null && expiresAt.getTime() - now > STILL_VALID_MARGIN_MS;
}

/**
 * Whether a fetch forces a refresh: `force_refresh`, or `refresh_vendor_app_jwt_token` on an
 * APP connection (the spec: "the JWT token of app-type connections is refreshed"); the vendor
 * flag means nothing for other types.
 */
export function shouldForce(type: string, flags: { force: boolean; vendorJwt: boolean }): boolean {
  return flags.force || (flags.vendorJwt && type === 'APP');
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
