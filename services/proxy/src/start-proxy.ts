import { proxyContracts, vaultContracts } from '@latchkey/contracts';
import type { Runtime } from '@latchkey/runtime';
import { serveProxyCalls } from '@latchkey/bus';
import type { Config } from './config.js';
import { createCredentialCache } from './domain/credential-cache.js';
import { proxyRequestHandler } from './handlers/proxy-request.js';
import { createAddressPolicy, createSafeLookup, parseCidrList } from '@latchkey/net';
import { verifyCredentialsHandler } from './handlers/verify-credentials.js';
import { createUpstreamDispatcher } from './upstream/call-upstream.js';

/** What a NATS message may carry besides its headers: bodies above this stream instead. */
const HEADROOM_BYTES = 64 * 1024;

/**
 * Wires the proxy: a credential cache kept in step with the vault's writes, the address
 * policy, and `proxy.request` in queue group `proxy`, so replicas share the load; `proxy.verify`
 * tries an end user's credentials before the vault saves them.
 */
export async function startProxy(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger } = runtime;
  const policy = createAddressPolicy({ allowCidrs: parseCidrList(config.PROXY_ALLOW_CIDRS) });
  const cache = createCredentialCache({ ttlMs: config.PROXY_CREDENTIAL_CACHE_MS, maxEntries: 100_000 });
  bus.onBroadcast(vaultContracts.connectionChanged, ({ id }) => cache.invalidate(id));
  void (async () => {
    for await (const status of bus.nc.status()) if (status.type === 'reconnect') cache.clear();
  })();

  const dispatcher = createUpstreamDispatcher(createSafeLookup(policy));
  const upstream = { policy, dispatcher, timeoutMs: config.PROXY_TIMEOUT_MS, maxRedirects: config.PROXY_MAX_REDIRECTS };
  bus.serve(proxyContracts.verifyCredentials, verifyCredentialsHandler({ upstream }));
  const handle = proxyRequestHandler({
    bus,
    nc: bus.nc,
    logger,
    cache,
    upstream,
    retryCapMs: config.PROXY_RETRY_CAP_MS,
    inlineLimit: Math.min(1024 * 1024, bus.nc.info!.max_payload - HEADROOM_BYTES),
  });
  const calls = serveProxyCalls(bus.nc, handle);
  runtime.onShutdown(async () => {
    await calls.drain();
    await dispatcher.close();
  });
}
