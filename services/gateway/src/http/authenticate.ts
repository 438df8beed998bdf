import type { NextFunction, Request, Response } from 'express';
import type { Scope } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { digestApiKey, safeEqual } from '../domain/api-key-secrets.js';
import type { ResolvedKey } from '../domain/key-cache.js';
import type { GatewayDeps } from './deps.js';

/** The bearer token of a request, or the documented 401. */
export function bearerToken(req: Request): string {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw new AppError('missing_auth_header', 'Authentication required: send Authorization: Bearer <secret key>');
  const match = /^Bearer ([\x21-\x7e]+)$/.exec(header);
  if (!match?.[1]) throw new AppError('malformed_auth_header', 'The Authorization header must be "Bearer <secret key>"');
  return match[1];
}

/** Where the authenticated key rides between middleware and handler. */
export function keyOf(res: Response): ResolvedKey {
  const key = res.locals['apiKey'] as ResolvedKey | undefined;
  if (!key) throw new AppError('internal_error', 'route reached without authentication');
  return key;
}

/**
 * API-key routes: the key (from memory on the hot path), the account's rate limit, then the
 * route's scope. Every authenticated response carries the X-RateLimit-* headers, refusals too.
 */
export function authenticate(deps: Pick<GatewayDeps, 'keyCache' | 'rateLimiter' | 'lastUsed' | 'config'>, scope: Scope) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const digest = digestApiKey(bearerToken(req), deps.config.API_KEY_DIGEST_SECRET);
    const cached = deps.keyCache.resolve(digest);
    const key = cached instanceof Promise ? await cached : cached;
    if (!key) throw new AppError('unknown_api_key', 'Unknown or revoked API key');
    deps.lastUsed.record(key.keyId);

    const decision = await deps.rateLimiter.take(key.accountId);
    res.setHeader('X-RateLimit-Limit', decision.limit);
    res.setHeader('X-RateLimit-Remaining', decision.remaining);
    res.setHeader('X-RateLimit-Reset', decision.resetAt);
    if (!decision.allowed) {
      res.setHeader('Retry-After', decision.retryAfter);
      throw new AppError('too_many_requests', `Rate limit of ${decision.limit} requests per minute reached; retry in ${decision.retryAfter} s`);
    }
    if (!key.scopes.has(scope)) throw new AppError('forbidden', `This API key lacks the scope ${scope}`, { payload: { scope } });
    res.locals['apiKey'] = key;
    next();
  };
}

/** Operator routes: `Authorization: Bearer $ADMIN_TOKEN`, compared in constant time. */
export function authenticateAdmin(deps: Pick<GatewayDeps, 'config'>) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (!safeEqual(bearerToken(req), deps.config.ADMIN_TOKEN)) throw new AppError('unknown_admin_token', 'Unknown admin token');
    next();
  };
}
