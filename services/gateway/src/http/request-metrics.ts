import type { IncomingMessage, ServerResponse } from 'node:http';
import { counter, httpRouteMetrics } from '@latchkey/metrics';

type Observe = (status: number, seconds: number) => void;

/** Times the response of a request (until its last byte is handed to the socket). */
export function timeResponse(res: ServerResponse, observe: Observe): void {
  const start = performance.now();
  res.once('finish', () => observe(res.statusCode, (performance.now() - start) / 1000));
}

/**
 * The recorder of a bare route, by method: a method outside those the route documents is
 * `_OTHER` (as the OpenTelemetry conventions say), so a client cannot make new series.
 */
export function bareRouteMetrics(route: string, methods: readonly string[]): (req: IncomingMessage) => Observe {
  const byMethod = new Map(methods.map((method) => [method.toUpperCase(), httpRouteMetrics(route, method)]));
  const other = httpRouteMetrics(route, '_OTHER');
  return (req) => byMethod.get(req.method ?? '') ?? other;
}

/** Error codes that mean "these credentials do not open this route" (the auth failures metric). */
const AUTH_FAILURE_CODES = new Set([
  'missing_auth_header',
  'malformed_auth_header',
  'unknown_api_key',
  'unknown_admin_token',
  'unknown_connect_session_token',
  'forbidden',
]);

const authFailures = counter('latchkey_gateway_auth_failures_total');
const rateLimited = counter('latchkey_gateway_rate_limited_total');

/** Counts an error answered, if it is an authentication failure. */
export function countAuthFailure(code: string): void {
  if (AUTH_FAILURE_CODES.has(code)) authFailures.inc({ code });
}

/** An address blocked for its failed authentications: counted as `auth_blocked`. */
export const countAuthBlocked = (): void => authFailures.inc({ code: 'auth_blocked' });

export const countRateLimited = (): void => rateLimited.inc();
