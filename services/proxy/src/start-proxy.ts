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
  const stopping = new AbortController();
  const handle = proxyRequestHandler({ bus, logger, cache, upstream, retryCapMs: config.PROXY_RETRY_CAP_MS, operations, logSuccesses: config.PROXY_LOG_SUCCESSES, stopping: stopping.signal });
  const calls = serveProxyCalls(bus, handle, { maxInFlight: config.PROXY_MAX_IN_FLIGHT });
  // From the moment shutdown begins: the runtime's deadline runs from then too. No call is taken
  // and no retry started after it, and the calls held are answered before the replica is killed.
  let drained: Promise<void> | undefined;
  runtime.onStopping(() => {
    stopping.abort();
    drained = calls.drain(drainDeadlineMs(config.SHUTDOWN_TIMEOUT_MS), () => dispatcher.destroy());
    // Its failure is the shutdown hook's to report, below; until then, no rejection goes unheard.
    drained.catch(() => undefined);
  });
  runtime.onShutdown(async () => {
    await drained;
    await operations.flush();
    // Nothing is in flight any more: what a call past the deadline held was destroyed already.
    await dispatcher.destroy();
  });
}

/**
 * Of SHUTDOWN_TIMEOUT_MS, what is kept after the calls' deadline: their connections cut and
 * their handlers ended (1 s at most), the operations log's last flush and NATS drained; a
 * quarter of a timeout shorter than 12 s.
 */
const SHUTDOWN_MARGIN_MS = 3_000;

/** How long a stopping replica waits for the calls it holds (42 s of the chart's 45). */
export const drainDeadlineMs = (shutdownTimeoutMs: number) => shutdownTimeoutMs - Math.min(SHUTDOWN_MARGIN_MS, shutdownTimeoutMs / 4);
