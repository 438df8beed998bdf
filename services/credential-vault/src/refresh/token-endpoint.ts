import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { ALLOW_CIDRS_HINT, OutboundRequestError, UpstreamNotAllowedError, type HttpClient } from '@latchkey/net';

/**
 * One call to a provider's token endpoint (OAuth 2 grants, OAuth 1 temporary and token
 * credentials, the token requests of other types), the only way this service reaches one:
 * through the libs/net client, so the address policy (`PROXY_ALLOW_CIDRS`, the proxy's) refuses
 * private, loopback, metadata… addresses before any socket is opened; no redirect is followed
 * (it would carry client secrets or credentials wherever the answer points), no retry, a
 * deadline, and a failure reported by its code alone (messages can quote the URL).
 */
export async function callTokenEndpoint(
  http: HttpClient,
  url: string,
  options: { method?: 'GET' | 'POST' | 'PUT'; headers: Record<string, string>; form?: Record<string, string>; json?: unknown; timeoutMs: number },
): Promise<{ statusCode: number; body: string }> {
  try {
    const response = await http.request(url, {
      method: options.method ?? 'POST',
      headers: options.headers,
      ...(options.form === undefined ? {} : { form: options.form }),
      ...(options.json === undefined ? {} : { json: options.json }),
      followRedirects: false,
      timeoutMs: options.timeoutMs,
    });
    return { statusCode: response.statusCode, body: response.body };
  } catch (error) {
    if (error instanceof OutboundRequestError && error.refusal) {
      // The range only, for the customer's backend (a refresh, a fetch), as the proxy tells it:
      // never the URL (its path or query may carry secrets). An end user's connect flow hears
      // none of it (`forEndUser`); the refusal rides along as the cause, for the log.
      throw new AppError('upstream_not_allowed', `The provider's endpoint is at an address that is not allowed (${error.refusal.reason}); ${ALLOW_CIDRS_HINT}`, {
        cause: error.refusal,
      });
    }
    const reason = error instanceof OutboundRequestError ? error.reason : 'network_error';
    throw new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", {
      payload: { error: 'unreachable', reason },
    });
  }
}

/**
 * Answers that say the token endpoint cannot serve the request now, not that it refuses it: a
 * server error or outage (5xx), a rate limit (429), a request that timed out at the server (408).
 */
const isTransientStatus = (status: number) => status >= 500 || status === 429 || status === 408;

/**
 * Whether a refresh failed only for now: its token endpoint was not reached (a timeout, a refused
 * or reset connection, a name that did not resolve: `unreachable` above) or answered 5xx, 429 or
 * 408 (the `status` every type's provider error carries: fresh-credentials.ts,
 * catalog-token-request.ts). Everything else fails the same way when asked again and is for
 * good: the provider's refusal (400 `invalid_grant`, any other 4xx), an answer without a token, a
 * request that cannot be built (an invalid URL, an address the policy refuses, a key that cannot
 * sign).
 */
export function failedForNow(error: AppError): boolean {
  if (error.code !== 'refresh_token_external_error') return false;
  const payload = error.payload ?? {};
  // An answer's status decides first: its `error` is the provider's own word, whatever it says.
  if (typeof payload['status'] === 'number') return isTransientStatus(payload['status']);
  return payload['error'] === 'unreachable' && payload['reason'] !== 'invalid_url';
}

/** What an end user hears of a token endpoint the address policy refused, whatever the reason. */
export const END_USER_NOT_ALLOWED = "The provider's endpoint is at an address that is not allowed; check the host you entered";

/**
 * A token endpoint's failure as an end user's connect flow may tell it. A refused address is one
 * message whatever the reason: the end user may have named the host (a self-hosted provider with
 * their own OAuth client), and the range or address it resolved to would map our internal DNS
 * for them. The reason goes to the log only. Other errors pass as they are.
 */
export function forEndUser(error: unknown, logger: Pick<Logger, 'warn'>): unknown {
  if (!(error instanceof AppError) || error.code !== 'upstream_not_allowed') return error;
  const refusal = error.cause instanceof UpstreamNotAllowedError ? error.cause : undefined;
  logger.warn("a connect flow's provider endpoint is at an address that is not allowed", refusal ? { host: refusal.hostname, address: refusal.address, reason: refusal.reason } : { reason: error.message });
  return new AppError('upstream_not_allowed', END_USER_NOT_ALLOWED);
}
