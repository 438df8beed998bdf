import type { RequestOf, proxyContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { UpstreamNetworkError, callUpstream, type UpstreamOptions } from '../upstream/call-upstream.js';
import { checkInjectedHeaders } from '../domain/header-policy.js';
import { buildCall } from '../domain/upstream-call.js';

/**
 * `proxy.verify`: calls a provider's verification endpoints with candidate credentials, injected
 * exactly as a proxied call would carry them, under the same address policy and redirect rules;
 * no retries. Answers the status of each (or the network error's code), never a body.
 */
export function verifyCredentialsHandler(deps: { upstream: UpstreamOptions }) {
  return async (request: RequestOf<typeof proxyContracts.verifyCredentials>) => {
    // Credentials no header can carry (a pasted key's line break) are the user's to mend, as a
    // proxied call says (400 invalid_headers), not the provider out of reach.
    checkInjectedHeaders(request.credentials.headers);
    const results = [];
    for (const endpoint of request.endpoints) {
      const [path = '', query = ''] = endpoint.split(/\?(.*)/s, 2);
      const call = buildCall(
        {
          environment_id: '',
          key_id: '',
          connection_id: '',
          provider_config_key: '',
          method: request.method,
          path,
          query,
          headers: Object.entries(request.headers),
          retries: 0,
          retry_on: [],
          ...(request.base_url_override === undefined ? {} : { base_url_override: request.base_url_override }),
          body: 'inline',
        },
        request.credentials,
        null,
      );
      try {
        const response = await callUpstream(call, { ...deps.upstream, timeoutMs: Math.min(deps.upstream.timeoutMs, request.timeout_ms) });
        response.discard();
        const status = response.status;
        results.push({ endpoint, status });
        if (status >= 200 && status < 300) break;
      } catch (error) {
        if (error instanceof UpstreamNetworkError) results.push({ endpoint, error: error.code });
        else if (error instanceof AppError && error.code === 'upstream_not_allowed') results.push({ endpoint, error: error.code });
        else throw error;
      }
    }
    return { results };
  };
}
