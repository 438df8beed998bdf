import type { Bus } from '@latchkey/bus';
import { proxyContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { interpolateUrl } from '../catalog/interpolate.js';
import type { Provider } from '../catalog/provider-schema.js';
import type { StoredCredentials } from './connection-credentials.js';
import { injectionFor } from './credential-injection.js';

/** One verification, all endpoints included: well inside the gateway's deadline for the connect request. */
const VERIFY_TIMEOUT_MS = 3_500;

/**
 * Tries credentials an end user entered against the provider's verification request, when its
 * catalog entry has one, before anything is stored. The proxy makes the calls (the one place
 * that reaches providers' APIs, with its address policy after DNS and no redirects followed
 * with credentials across origins), with the injection the proxy would use for the saved
 * connection. One 2xx answer accepts; otherwise 400 `connection_test_failed`, whose payload
 * names only endpoints and statuses, and `unreachable` for an endpoint that gave no answer.
 */
export async function verifyCredentials(
  deps: { bus: Bus; logger: Pick<Logger, 'warn'> },
  provider: { name: string; entry: Provider },
  client: Record<string, string>,
  connectionConfig: Record<string, unknown>,
  credentials: StoredCredentials,
): Promise<void> {
  const verification = provider.entry.verification;
  if (!verification) return;
  const injection = injectionFor(provider.entry, client, connectionConfig, credentials);
  let baseUrlOverride: string | undefined;
  if (verification.base_url_override) {
    try {
      baseUrlOverride = interpolateUrl(verification.base_url_override, { connectionConfig });
    } catch (error) {
      throw new AppError('invalid_body', `Cannot build the provider's verification URL: ${(error as Error).message}`);
    }
  }
  const { results } = await deps.bus.request(
    proxyContracts.verifyCredentials,
    {
      credentials: {
        id: 'verification',
        provider: provider.name,
        expires_at: null,
        ...injection,
        // The catalog's verification URL is one of the provider's own hosts.
        allowed_hosts: [...(injection.allowed_hosts ?? []), ...(baseUrlOverride === undefined ? [] : [new URL(baseUrlOverride).host])],
      },
      method: verification.method,
      endpoints: verification.endpoints,
      ...(baseUrlOverride === undefined ? {} : { base_url_override: baseUrlOverride }),
      headers: verification.headers ?? {},
      timeout_ms: VERIFY_TIMEOUT_MS,
    },
    { timeoutMs: VERIFY_TIMEOUT_MS + 1_000 },
  );
  if (results.some((result) => 'status' in result && result.status >= 200 && result.status < 300)) return;
  // The end user may have named the host (a self-hosted API), which the proxy resolves in our
  // network: an address it refused (`upstream_not_allowed`) told apart from a name that did not
  // resolve or a port that did not answer (`ENOTFOUND`, `ECONNREFUSED`…) would map our internal
  // DNS for them. So every endpoint that gave no answer is `unreachable` to them, whatever the
  // reason; the reasons go to the operator's log (with the catalog's endpoints, which the end
  // user sees too; not the host, whose template may place a credential).
  const failed = results.flatMap((result) => ('error' in result ? [{ endpoint: result.endpoint, error: result.error }] : []));
  if (failed.length > 0) deps.logger.warn("a connect flow's verification request got no answer", { provider: provider.name, results: failed });
  const told = results.map((result) => ('error' in result ? { endpoint: result.endpoint, error: 'unreachable' } : result));
  throw new AppError(
    'connection_test_failed',
    failed.length === results.length ? 'The provider could not be reached to check these credentials; try again later' : 'The provider refused these credentials',
    { payload: { results: told } },
  );
}
