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

/**
 * What an end user hears of a token endpoint that gave no answer, whatever kept it from one: an
 * address the policy refused, a name that did not resolve, a port that refused, a timeout.
 */
export const END_USER_UNREACHABLE = "The provider's token endpoint could not be reached; check the host you entered, or try again later";

/**
 * A token endpoint's failure as an end user's connect flow may tell it. The end user may have
 * named the host (a self-hosted provider with their own OAuth client), and the vault resolves it
 * in our network: if a refused address (the range, or the code itself) read otherwise than a name
 * that does not resolve or a port that does not answer, their answers would map our internal DNS,
 * which names exist and which resolve to private ranges. So every endpoint that gave no answer is
 * one error, identical in code, status, message and payload; why goes to the log only (the host
 * and address, never the URL's path or query). The provider's answers (a `status`, its own
 * `error`) and every other error pass as they are.
 */
export function forEndUser(error: unknown, logger: Pick<Logger, 'warn'>): unknown {
  if (!(error instanceof AppError)) return error;
  const payload = error.payload ?? {};
  if (error.code === 'upstream_not_allowed') {
    const refusal = error.cause instanceof UpstreamNotAllowedError ? error.cause : undefined;
    logger.warn("a connect flow's provider endpoint is at an address that is not allowed", refusal ? { host: refusal.hostname, address: refusal.address, reason: refusal.reason } : { reason: error.message });
  } else if (error.code === 'refresh_token_external_error' && payload['error'] === 'unreachable' && typeof payload['status'] !== 'number') {
    logger.warn("a connect flow's provider endpoint could not be reached", { reason: payload['reason'] });
  } else {
    return error;
  }
  return new AppError('refresh_token_external_error', END_USER_UNREACHABLE, { payload: { error: 'unreachable' } });
}
