import { AppError } from '@latchkey/errors';
import { ALLOW_CIDRS_HINT, OutboundRequestError, type HttpClient } from '@latchkey/net';

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
      // The range only: never the URL (its path or query may carry secrets), nor the address a
      // name resolved to (end users reach this answer, and internal DNS is not theirs to map).
      throw new AppError('upstream_not_allowed', `The provider's endpoint is at an address that is not allowed (${error.refusal.reason}); ${ALLOW_CIDRS_HINT}`);
    }
    const reason = error instanceof OutboundRequestError ? error.reason : 'network_error';
    throw new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", {
      payload: { error: 'unreachable', reason },
    });
  }
}
