import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'express';
import { z } from 'zod';
import { vaultContracts, type ConnectSession, type Scope } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { safeEqual } from '../domain/api-key-secrets.js';
import type { ResolvedKey } from '../domain/key-cache.js';
import type { KeyCheck } from '../domain/authenticate-key.js';
import type { RateLimitDecision } from '../domain/rate-limiter.js';
import { clientAddress, clientBucket } from './client-address.js';
import type { GatewayDeps } from './deps.js';
import type { HeaderSink } from './own-headers.js';
import { countAuthBlocked, countRateLimited } from './request-metrics.js';

/** The bearer token of a request, or the documented 401. */
export function bearerToken(req: IncomingMessage): string {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw new AppError('missing_auth_header', 'Authentication required: send Authorization: Bearer <secret key>');
  const match = /^Bearer ([\x21-\x7e]+)$/.exec(header);
  if (!match?.[1]) throw new AppError('malformed_auth_header', 'The Authorization header must be "Bearer <secret key>"');
  return match[1];
}

/**
 * API-key routes: the key (from memory on the hot path), the account's rate limit, then the
 * route's scope. Every authenticated response carries the X-RateLimit-* headers, refusals too:
 * they go to `res`, the response or a bare route's own headers. Synchronous while the key is
 * cached and the replica holds rate-limit tokens.
 */
export function authorize(
  deps: Pick<GatewayDeps, 'authenticateKey' | 'rateLimiter' | 'lastUsed' | 'config'>,
  req: IncomingMessage,
  res: HeaderSink,
  scope: Scope | readonly Scope[],
): ResolvedKey | Promise<ResolvedKey> {
  const checked = deps.authenticateKey(bearerToken(req), () => clientBucket(clientAddress(req, deps.config.TRUSTED_PROXY_HOPS)), req.socket);
  if (checked instanceof Promise) return checked.then((check) => admit(deps, res, check, scope));
  return admit(deps, res, checked, scope);
}

function admit(
  deps: Pick<GatewayDeps, 'rateLimiter' | 'lastUsed'>,
  res: HeaderSink,
  check: KeyCheck,
  scope: Scope | readonly Scope[],
): ResolvedKey | Promise<ResolvedKey> {
  if ('blocked' in check) {
    countAuthBlocked();
    res.setHeader('Retry-After', check.blocked);
    throw new AppError('too_many_requests', `Too many failed authentications from this address; retry in ${check.blocked} s`);
  }
  if ('unknown' in check) throw new AppError('unknown_api_key', 'Unknown or revoked API key');
  const { key } = check;
  deps.lastUsed.record(key.keyId);
  const decision = deps.rateLimiter.take(key.accountId);
  if (decision instanceof Promise) return decision.then((settled) => enforce(res, key, scope, settled));
  return enforce(res, key, scope, decision);
}

function enforce(res: HeaderSink, key: ResolvedKey, scope: Scope | readonly Scope[], decision: RateLimitDecision): ResolvedKey {
  res.setHeader('X-RateLimit-Limit', decision.limit);
  res.setHeader('X-RateLimit-Remaining', decision.remaining);
  res.setHeader('X-RateLimit-Reset', decision.resetAt);
  if (!decision.allowed) {
    countRateLimited();
    res.setHeader('Retry-After', decision.retryAfter);
    throw new AppError('too_many_requests', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.retryAfter} s`);
  }
  if (typeof scope === 'string' ? !key.scopes.has(scope) : !scope.some((one) => key.scopes.has(one))) {
    const named = typeof scope === 'string' ? scope : scope.join(' or ');
    throw new AppError('forbidden', `This API key lacks the scope ${named}`, { payload: { scope: named } });
  }
  return key;
}

/** Operator routes: `Authorization: Bearer $ADMIN_TOKEN`, compared in constant time. */
export function authorizeAdmin(deps: Pick<GatewayDeps, 'config'>, req: IncomingMessage): void {
  if (!safeEqual(bearerToken(req), deps.config.ADMIN_TOKEN)) throw new AppError('unknown_admin_token', 'Unknown admin token');
}

/** What the vault issues as a connect-session token: `lk_cs_` and 32 random bytes, base64url. */
const SESSION_TOKEN = /^lk_cs_[A-Za-z0-9_-]{43}$/;

/** Whether a request carries a connect-session token rather than an API key (by its shape). */
export function carriesSessionToken(req: Request): boolean {
  const fromQuery = req.query['connect_session_token'];
  if (typeof fromQuery === 'string' && fromQuery !== '') return true;
  return /^Bearer lk_cs_/.test(req.headers.authorization ?? '');
}

/** The query of a connect-flow route that takes nothing else: the session token, when it comes that way. */
export const SESSION_TOKEN_QUERY = z.strictObject({ connect_session_token: z.string().min(1).optional() });

/**
 * Connect-flow routes: the end user's session token, from the `connect_session_token` query
 * parameter (what the Connect UI's forms and redirects carry) or a bearer header. Unknown tokens
 * count against the client address as unknown API keys do (429 past AUTH_FAILURES_PER_MINUTE,
 * before any lookup), and a token of another shape is refused without asking the vault. A known
 * token has CONNECT_SESSION_REQUESTS_PER_MINUTE across replicas: each of its flows writes to the
 * database and may call a provider, and an end user is no one's to trust.
 */
export async function authorizeSession(
  deps: Pick<GatewayDeps, 'bus' | 'authFailures' | 'sessionLimiter' | 'config'>,
  req: Request,
  res: ServerResponse,
): Promise<ConnectSession & { token: string }> {
  const fromQuery = req.query['connect_session_token'];
  const token = typeof fromQuery === 'string' && fromQuery !== '' ? fromQuery : bearerToken(req);
  const address = clientBucket(clientAddress(req, deps.config.TRUSTED_PROXY_HOPS));
  const retryAfter = deps.authFailures.retryAfter(address);
  if (retryAfter > 0) {
    countAuthBlocked();
    res.setHeader('Retry-After', retryAfter);
    throw new AppError('too_many_requests', `Too many failed authentications from this address; retry in ${retryAfter} s`);
  }
  const unknown = new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
  deps.authFailures.record(address);
  if (!SESSION_TOKEN.test(token)) throw unknown;
  try {
    const session = await deps.bus.request(vaultContracts.getConnectSession, { token });
    deps.authFailures.forgive(address);
    // Keyed by a digest: the rate-limit bucket never holds a token.
    const decision = await deps.sessionLimiter.take(`connect-session.${createHash('sha256').update(token).digest('base64url').slice(0, 32)}`);
    if (!decision.allowed) {
      countRateLimited();
      res.setHeader('Retry-After', decision.retryAfter);
      throw new AppError('too_many_requests', `This connect session made ${decision.limit} requests this minute; retry in ${decision.retryAfter} s`);
    }
    return { ...session, token };
  } catch (error) {
    // Only an unknown token is the client's failure; an outage (or a busy session) is not.
    if (!(error instanceof AppError && error.code === 'unknown_connect_session_token')) deps.authFailures.forgive(address);
    throw error;
  }
}
