import { describe, expect, it } from '@jest/globals';
import { BACKOFF_MS, REFRESH_WINDOW_MS, inBackoff, isExhausted, lifetimeOf, needsRefresh, recordFailure, shouldForce, stillValid } from './refresh-policy.js';

const error = { code: 'invalid_grant', message: 'refresh token revoked' };

describe('refresh policy', () => {
  it('refreshes inside the 15-minute window, or always when forced', () => {
    const now = Date.now();
    expect(needsRefresh('OAUTH2', new Date(now + REFRESH_WINDOW_MS + 1000), now, false)).toBe(false);
    expect(needsRefresh('OAUTH2', new Date(now + 60_000), now, false)).toBe(true);
    expect(needsRefresh('OAUTH2', new Date(now + REFRESH_WINDOW_MS + 1000), now, true)).toBe(true);
    expect(needsRefresh('OAUTH2', null, now, false)).toBe(false);
    expect(needsRefresh('API_KEY', null, now, true)).toBe(false);
  });

  it('refreshes a short-lived token in the second half of its life, not on every fetch', () => {
    const now = Date.now();
    // Keycloak's default: five minutes.
    const fiveMinutes = { raw: { access_token: 'a', expires_in: 300 } };
    expect(lifetimeOf(fiveMinutes)).toBe(300_000);
    expect(needsRefresh('OAUTH2', new Date(now + 280_000), now, false, fiveMinutes)).toBe(false);
    expect(needsRefresh('OAUTH2', new Date(now + 140_000), now, false, fiveMinutes)).toBe(true);
    // Never closer to its expiry than two minutes, however short it lives.
    expect(needsRefresh('OAUTH2', new Date(now + 100_000), now, false, { raw: { expires_in: '60' } })).toBe(true);
    // An hour-long token, or one of unknown life, keeps the 15-minute window.
    expect(needsRefresh('OAUTH2', new Date(now + 10 * 60_000), now, false, { raw: { expires_in: 3600 } })).toBe(true);
    expect(needsRefresh('OAUTH2', new Date(now + 10 * 60_000), now, false, { raw: {} })).toBe(true);
  });

  it('knows the life of a bought token whose answer is not kept from when the vault asked for it', () => {
    const now = Date.now();
    // Bought ten seconds ago, for ten minutes: SIGNATURE keeps no raw, TWO_STEP the user's, BILL an answer without expires_in.
    const obtained = new Date(now - 10_000);
    const expires = new Date(obtained.getTime() + 600_000);
    for (const [type, credentials] of [
      ['SIGNATURE', { type: 'SIGNATURE', username: 'u', password: 'p', token: 't' }],
      ['TWO_STEP', { type: 'TWO_STEP', raw: { user: 'u' }, token: 't' }],
      ['BILL', { type: 'BILL', session_id: 's', raw: { response_data: { sessionId: 's' } } }],
    ] as const) {
      expect({ type, refresh: needsRefresh(type, expires, now, false, credentials, obtained) }).toEqual({ type, refresh: false });
      // In its second half, it is bought again.
      expect(needsRefresh(type, expires, obtained.getTime() + 320_000, false, credentials, obtained)).toBe(true);
    }
    // Not knowing when it was asked for (credentials given to the vault): the 15-minute window.
    expect(needsRefresh('SIGNATURE', expires, now, false, { token: 't' }, null)).toBe(true);
  });

  it('hands out a token refreshed ahead only while it outlives the call by a minute', () => {
    const now = Date.now();
    expect(stillValid(new Date(now + 5 * 60_000), now)).toBe(true);
    expect(stillValid(new Date(now + 30_000), now)).toBe(false);
    expect(stillValid(new Date(now - 1000), now)).toBe(false);
    expect(stillValid(null, now)).toBe(false);
  });

  it('gets a token on first fetch for the types whose token is made from the credentials', () => {
    const now = Date.now();
    for (const type of ['JWT', 'OAUTH2_CC', 'TWO_STEP', 'BILL', 'SIGNATURE']) {
      expect(needsRefresh(type, null, now, false)).toBe(true);
      expect(needsRefresh(type, new Date(now + REFRESH_WINDOW_MS + 1000), now, false)).toBe(false);
      expect(needsRefresh(type, new Date(now + 60_000), now, false)).toBe(true);
    }
    expect(needsRefresh('APP', null, now, false)).toBe(false);
    expect(needsRefresh('APP', new Date(now + 60_000), now, false)).toBe(true);
  });

  it('keeps a bought token whose provider stated no lifetime until it is refused, and signs a JWT again', () => {
    const now = Date.now();
    expect(needsRefresh('OAUTH2_CC', null, now, false, { token: 'cc-token', raw: { access_token: 'cc-token' } })).toBe(false);
    expect(needsRefresh('TWO_STEP', null, now, false, { token: 'two-step-token' })).toBe(false);
    expect(needsRefresh('SIGNATURE', null, now, false, { token: 'signature-token' })).toBe(false);
    expect(needsRefresh('BILL', null, now, false, { session_id: 'bill-session' })).toBe(false);
    expect(needsRefresh('OAUTH2_CC', null, now, true, { token: 'cc-token' })).toBe(true);
    expect(needsRefresh('OAUTH2_CC', null, now, false, { token: '' })).toBe(true);
    expect(needsRefresh('JWT', null, now, false, { token: 'signed.here.before' })).toBe(true);
  });

  it('forces on force_refresh, and on refresh_vendor_app_jwt_token for APP connections only', () => {
    expect(shouldForce('OAUTH2', { force: true, vendorJwt: false })).toBe(true);
    expect(shouldForce('APP', { force: false, vendorJwt: true })).toBe(true);
    expect(shouldForce('APP', { force: false, vendorJwt: false })).toBe(false);
    expect(shouldForce('OAUTH2', { force: false, vendorJwt: true })).toBe(false);
    expect(shouldForce('JWT', { force: false, vendorJwt: true })).toBe(false);
  });

  it('backs off 30 s after a failure and is exhausted after failures on three days', () => {
    const first = recordFailure(null, new Date('2026-01-01T10:00:00Z'), error);
    expect(inBackoff(first, Date.parse('2026-01-01T10:00:10Z'))).toBe(true);
    expect(inBackoff(first, Date.parse('2026-01-01T10:00:00Z') + BACKOFF_MS + 1)).toBe(false);
    const sameDay = recordFailure(first, new Date('2026-01-01T18:00:00Z'), error);
    expect(isExhausted(sameDay)).toBe(false);
    const third = recordFailure(recordFailure(sameDay, new Date('2026-01-02T10:00:00Z'), error), new Date('2026-01-05T10:00:00Z'), error);
    expect(isExhausted(third)).toBe(true);
  });
});
