import { busOperationLog } from '@latchkey/bus';
import { proxyContracts, vaultContracts } from '@latchkey/contracts';
import type { RuntimeWithoutDatabase } from '@latchkey/runtime';
import type { Config } from './config.js';
import { createCredentialCache } from './domain/credential-cache.js';
import { proxyRequestHandler } from './handlers/proxy-request.js';
import { serveProxyCalls } from './handlers/serve-proxy-calls.js';
import { createAddressPolicy, createSafeLookup, parseCidrList } from '@latchkey/net';
import { verifyCredentialsHandler } from './handlers/verify-credentials.js';
import { createUpstreamDispatcher } from './upstream/call-upstream.js';

/**
 * Wires the proxy: a credential cache kept in step with the vault's writes, the address
 * policy, and `proxy.request` in queue group `proxy`, so replicas share the load; `proxy.verify`
 * tries an end user's credentials before the vault saves them.
 */
export async function startProxy(runtime: RuntimeWithoutDatabase, config: Config): Promise<void> {
  const { bus, logger } = runtime;
  const policy = createAddressPolicy({ allowCidrs: parseCidrList(config.PROXY_ALLOW_CIDRS) });
  const cache = createCredentialCache({ ttlMs: config.PROXY_CREDENTIAL_CACHE_MS, maxEntries: 100_000 });
  bus.onBroadcast(vaultContracts.connectionChanged, ({ id }) => cache.invalidate(id));
  bus.onReconnect(() => cache.clear());

  const dispatcher = createUpstreamDispatcher(createSafeLookup(policy));
  const upstream = { policy, dispatcher, timeoutMs: config.PROXY_TIMEOUT_MS, maxRedirects: config.PROXY_MAX_REDIRECTS };
  bus.serve(proxyContracts.verifyCredentials, verifyCredentialsHandler({ upstream }));
  const operations = busOperationLog(bus, logger, 'proxy');
  const handle = proxyRequestHandler({ bus, logger, cache, upstream, retryCapMs: config.PROXY_RETRY_CAP_MS, operations, logSuccesses: config.PROXY_LOG_SUCCESSES });
  const calls = serveProxyCalls(bus, handle);
  runtime.onShutdown(async () => {
    await calls.drain();
    await operations.flush();
    await dispatcher.close();
  });
}
