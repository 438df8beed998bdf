import type { Server } from 'node:http';
import * as simpleIcons from 'simple-icons';
import type { AddressInfo } from 'node:net';
import { consume, createKvLocks, openKv, WRITE_KEYS } from '@latchkey/bus';
import { KV_BUCKETS, SERVICE_NAMES, STREAMS, gatewayContracts, givenUpContracts, givenUpDurableOf } from '@latchkey/contracts';
import { serveMetrics } from '@latchkey/metrics';
import type { Runtime } from '@latchkey/runtime';
import { traceHttpRequests } from '@latchkey/tracing';
import type { Config } from './config.js';
import { createAccountRepo } from './db/account-repo.js';
import { createApiKeyRepo } from './db/api-key-repo.js';
import { createEnvironmentRepo } from './db/environment-repo.js';
import { createGivenUpRepo } from './db/given-up-repo.js';
import { createOperationRepo } from './db/operation-repo.js';
import { answeringUnavailable } from './db/unavailable.js';
import { digestApiKey, keyFormat } from './domain/api-key-secrets.js';
import { createAuthFailureLimiter } from './domain/auth-failures.js';
import { createKeyAuthenticator } from './domain/authenticate-key.js';
import { bootstrap } from './domain/bootstrap.js';
import { createKeyCache } from './domain/key-cache.js';
import { createSettingsCipher } from './domain/settings-cipher.js';
import { createLastUsedTracker } from './domain/last-used.js';
import { createRateLimiter, type WindowStore } from './domain/rate-limiter.js';
import { createEnvironmentCache } from './domain/environment-cache.js';
import { serializedEnvironmentWrites } from './domain/environment-writes.js';
import { createKnownEnvironments } from './domain/known-environments.js';
import { consumeOperations, operationsSweeper } from './domain/operations-log.js';
import { createProviderLogos } from './domain/provider-logos.js';
import { getEnvironmentHandler, getSigningKeysHandler } from './handlers/get-environment.js';
import { createApp } from './http/create-app.js';
import type { GatewayDeps } from './http/deps.js';
import { withBareRoutes } from './http/serve-bare.js';
import { bareRoutes, routes } from './routes/index.js';

const LAST_USED_FLUSH_MS = 60_000;

/**
 * Wires the gateway onto a started runtime and listens on PORT. Returns the bound port.
 */
export async function startGateway(runtime: Runtime, config: Config): Promise<{ port: number; metricsPort?: number }> {
  const { bus, logger, mongo } = runtime;
  const accounts = createAccountRepo(mongo);
  const environmentRepo = createEnvironmentRepo(mongo, createSettingsCipher(config.SETTINGS_ENCRYPTION_KEYS, { sealingVersion: config.SETTINGS_SEALING_VERSION }));
  const apiKeys = createApiKeyRepo(mongo);
  const givenUp = createGivenUpRepo(mongo);
  const operations = createOperationRepo(mongo, { onInvalid: (entries) => logger.warn('left out operations a recorder sent malformed', { entries }) });
  await Promise.all([accounts.init(), environmentRepo.init(), apiKeys.init(), givenUp.init(), operations.init()]);
  // Changes to one environment go one at a time across replicas (see environment-writes),
  // this start's own among them: other replicas may be serving meanwhile.
  const environmentLocks = createKvLocks(await openKv<{ owner: string }>(bus, { name: 'environment_locks', ttlMs: WRITE_KEYS.ttlMs }));
  const serializedEnvironments = serializedEnvironmentWrites(environmentRepo, environmentLocks);
  const resealed = await serializedEnvironments.sealAtRest();
  if (resealed > 0) logger.info('sealed environment settings at rest', { environments: resealed });
  // Keys stored before authentication looked digests up by _id get their entry (see api-key-repo).
  await apiKeys.indexDigests();

  await bootstrap(
    { accounts, environments: serializedEnvironments, apiKeys, logger },
    { environmentName: config.BOOTSTRAP_ENVIRONMENT, secretKey: config.BOOTSTRAP_SECRET_KEY, digestSecret: config.API_KEY_DIGEST_SECRET },
  );

  const keyCache = createKeyCache(
    { digestOf: (secret) => digestApiKey(secret, config.API_KEY_DIGEST_SECRET), findByDigest: apiKeys.findByDigest },
    { ttlMs: 5 * 60_000, negativeTtlMs: 5_000, maxEntries: 100_000, maxUnknown: 10_000 },
  );
  const authFailures = createAuthFailureLimiter({ limit: config.AUTH_FAILURES_PER_MINUTE, windowMs: 60_000, maxAddresses: 50_000 });
  const authenticateKey = createKeyAuthenticator({ keys: keyCache, isWellFormed: keyFormat(config.BOOTSTRAP_SECRET_KEY), failures: authFailures });
  bus.onBroadcast(gatewayContracts.apiKeyChanged, ({ digest }) => keyCache.invalidate(digest));
  const environmentCache = createEnvironmentCache(
    { repo: serializedEnvironments, announce: (environmentId) => bus.broadcast(gatewayContracts.environmentChanged, { environment_id: environmentId }) },
    { ttlMs: 60_000, maxEntries: 10_000 },
  );
  const environments = { ...serializedEnvironments, findById: environmentCache.findById, update: environmentCache.update, rotateSigningKeys: environmentCache.rotateSigningKeys };
  bus.onBroadcast(gatewayContracts.environmentChanged, ({ environment_id }) => environmentCache.invalidate(environment_id));
  // Broadcasts sent while this replica was cut off are lost: forget everything on reconnect.
  bus.onReconnect(() => {
    keyCache.clear();
    environmentCache.clear();
  });

  const store: WindowStore = await openKv<{ reserved: number }>(bus, KV_BUCKETS.rateLimits);
  // A reservation waits out a bucket electing its leader, never past the request's own deadline.
  const rateLimiter = createRateLimiter({ store }, { limit: config.RATE_LIMIT_PER_MINUTE, windowMs: 60_000, unavailableRetryMs: config.REQUEST_TIMEOUT_MS });
  // The same bucket, under keys of their own (`webhook-ingest.<public id>`).
  const webhookIngest = createRateLimiter({ store }, { limit: config.WEBHOOK_INGEST_BYTES_PER_MINUTE, windowMs: 60_000, unavailableRetryMs: config.REQUEST_TIMEOUT_MS });
  const sessionLimiter = createRateLimiter({ store }, { limit: config.CONNECT_SESSION_REQUESTS_PER_MINUTE, windowMs: 60_000, unavailableRetryMs: config.REQUEST_TIMEOUT_MS });

  const lastUsed = createLastUsedTracker({ touch: apiKeys.touchLastUsed });
  const flushTimer = setInterval(() => {
    lastUsed.flush().catch((error: unknown) => logger.warn('could not write last_used_at', { error }));
  }, LAST_USED_FLUSH_MS);
  flushTimer.unref();

  // What any service's consumers gave up on, kept for the operator API: one durable per
  // service, each pinned to that service's subject, which names the record's service.
  const givenUpRecords = await Promise.all(
    SERVICE_NAMES.map((service) =>
      consume({
        bus,
        logger,
        stream: STREAMS.events.name,
        durable: givenUpDurableOf(service),
        contract: givenUpContracts[service],
        concurrency: 1,
        handler: (record) => givenUp.record({ ...record, service }),
      }),
    ),
  );
  runtime.onShutdown(() => Promise.all(givenUpRecords.map((consumer) => consumer.stop())).then(() => undefined));

  // The operations log: stored from every service's batches, swept for age and size.
  const operationConsumers = await consumeOperations({ bus, logger, operations });
  runtime.onShutdown(() => Promise.all(operationConsumers.map((consumer) => consumer.stop())).then(() => undefined));
  const sweepOperations = operationsSweeper(
    { operations, environments, logger },
    { retentionDays: config.OPERATIONS_RETENTION_DAYS, maxPerEnvironment: config.OPERATIONS_MAX_PER_ENVIRONMENT },
  );
  const sweepTimer = setInterval(() => {
    sweepOperations().catch((error: unknown) => logger.warn('could not sweep the operations log', { error }));
  }, config.OPERATIONS_SWEEP_INTERVAL_MS);
  sweepTimer.unref();

  bus.serve(gatewayContracts.getEnvironment, answeringUnavailable(getEnvironmentHandler({ environments })));
  bus.serve(gatewayContracts.getSigningKeys, answeringUnavailable(getSigningKeysHandler({ environments })));
  const knownEnvironments = createKnownEnvironments(
    { exists: async (publicId) => (await environments.findByPublicId(publicId)) !== null },
    { negativeTtlMs: 5_000, maxUnknown: 10_000 },
  );

  const deps: GatewayDeps = {
    config,
    logger,
    bus,
    keyCache,
    authenticateKey,
    authFailures,
    rateLimiter,
    webhookIngest,
    sessionLimiter,
    lastUsed,
    accounts,
    environments,
    knownEnvironments,
    apiKeys,
    givenUp,
    operations,
    logos: createProviderLogos(Object.values(simpleIcons).filter((icon): icon is simpleIcons.SimpleIcon => 'slug' in icon)),
    isReady: runtime.isReady,
  };
  // A server span per request while tracing is on, continuing the caller's traceparent.
  const server: Server = await runtime.serveHttp(traceHttpRequests(withBareRoutes(createApp(deps, routes), bareRoutes, deps)), config.PORT);
  server.keepAliveTimeout = 65_000;
  const port = (server.address() as AddressInfo).port;
  logger.info('listening', { port, public_url: config.PUBLIC_URL });
  const metrics = config.METRICS_PORT ? await serveMetrics(config.METRICS_PORT) : undefined;
  const metricsPort = metrics ? (metrics.address() as AddressInfo).port : undefined;
  if (metrics) runtime.onShutdown(() => new Promise<void>((resolve) => metrics.close(() => resolve())));

  runtime.onShutdown(async () => {
    clearInterval(flushTimer);
    clearInterval(sweepTimer);
    // /ready answers 503 from now on (the runtime is stopping): give load balancers time to
    // notice before the port closes, while requests still arriving are served as usual.
    if (config.SHUTDOWN_READY_DELAY_MS > 0) await new Promise((resolve) => setTimeout(resolve, config.SHUTDOWN_READY_DELAY_MS));
    // Stop accepting; let requests in flight finish. Idle keep-alive sockets close now, and so
    // does each socket whose request finishes later: left open, a client's keep-alive socket
    // would hold the server (and the exit) until the shutdown deadline.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const closeIdle = setInterval(() => server.closeIdleConnections(), 100);
    await closed.finally(() => clearInterval(closeIdle));
    await lastUsed.flush().catch(() => undefined);
  });
  return { port, ...(metricsPort === undefined ? {} : { metricsPort }) };
}
