import { busOperationLog, consume, createKvLocks, openKv, recordedHandler, WRITE_KEYS } from '@latchkey/bus';
import { createAddressPolicy, createHttpClient, parseCidrList } from '@latchkey/net';
import { STREAMS, proxyContracts, syncContracts, vaultContracts, vaultWebhookContracts } from '@latchkey/contracts';
import type { Runtime } from '@latchkey/runtime';
import { loadCatalog } from './catalog/load-catalog.js';
import { logoUrl, toPublicProvider } from './catalog/provider-schema.js';
import type { Config } from './config.js';
import { createKeyring } from './crypto/keyring.js';
import { createConnectSessionRepo } from './db/connect-session-repo.js';
import { createConnectionRepo } from './db/connection-repo.js';
import { createOAuthSessionRepo } from './db/oauth-session-model.js';
import { createCredentialReadRepo } from './db/credential-read-repo.js';
import { createDataKeyRepo } from './db/data-key-repo.js';
import { createIntegrationRepo } from './db/integration-repo.js';
import { createLifecycleOutboxRepo } from './db/lifecycle-outbox-model.js';
import { createRefreshAnswerRepo } from './db/refresh-answer-model.js';
import { createRefreshLogRepo } from './db/refresh-log-repo.js';
import { createConnectSessionService } from './domain/connect-sessions.js';
import { announcingWrites, createConnectionCache } from './domain/connection-cache.js';
import { createConnectionCredentials } from './domain/connection-credentials.js';
import { serializedConnectionWrites, serializedIntegrationWrites } from './domain/serialized-writes.js';
import { createConnectionService } from './domain/connections.js';
import { createIntegrationService } from './domain/integrations.js';
import { createLifecycleEvents } from './domain/lifecycle-events.js';
import { createReadAudit } from './domain/read-audit.js';
import { countingReads } from './vault-metrics.js';
import type { VaultDeps } from './domain/vault-deps.js';
import type { VaultServices } from './domain/vault-services.js';
import {
  connectClientCredentialsHandler,
  connectWithSessionHandler,
  createConnectSessionHandler,
  deleteConnectSessionHandler,
  getConnectSessionHandler,
} from './handlers/connect-sessions.js';
import {
  createConnectionHandler,
  deleteConnectionHandler,
  getConnectionHandler,
  listConnectionsHandler,
  integrationConnectionsHandler,
  patchConnectionHandler,
  resolveConnectionHandler,
  writeMetadataHandler,
} from './handlers/connections.js';
import {
  createIntegrationHandler,
  deleteIntegrationHandler,
  getIntegrationHandler,
  listIntegrationsHandler,
  updateIntegrationHandler,
} from './handlers/integrations.js';
import { finishOAuth1Handler, finishOAuthHandler, refuseOAuthHandler, startOAuthHandler } from './handlers/oauth-flow.js';
import { getProviderHandler, listProvidersHandler } from './handlers/providers.js';
import { proxyCredentialsHandler } from './handlers/proxy-credentials.js';
import { rotateKeysHandler } from './handlers/rotate-keys.js';
import { syncRunHandler } from './handlers/sync-runs.js';
import { matchConnectionHandler, matchConnectionsHandler, webhookIntegrationHandler } from './handlers/webhooks.js';
import { createRefresher } from './refresh/refresher.js';

/** How long a decrypted connection may serve fetches without a read; writes invalidate it at once. */
const CONNECTION_CACHE_TTL_MS = 30_000;
/** How often expired connect sessions and OAuth flows are deleted. */
const SESSION_SWEEP_MS = 5 * 60_000;
/** How often the lifecycle outbox is looked at for facts a replica left unpublished. */
const OUTBOX_SWEEP_MS = 30_000;

/**
 * Locks live this long at most: a replica that dies mid-refresh frees the connection. A holder
 * renews its lock just before calling the provider, so the TTL must outlast that call's deadline
 * (`REFRESH_TIMEOUT_MS`) with room to store the result.
 */
const refreshLockTtlMs = (timeoutMs: number) => Math.max(30_000, 2 * timeoutMs + 5_000);

/** Wires the vault onto a started runtime: repositories, keyring, catalog, refresher, subjects. */
export async function startVault(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
  const catalog = loadCatalog(config.PROVIDERS_FILE === undefined ? {} : { providersFile: config.PROVIDERS_FILE });
  const cache = createConnectionCache({ ttlMs: CONNECTION_CACHE_TTL_MS, maxEntries: 50_000 });
  const wantedLockTtlMs = refreshLockTtlMs(config.REFRESH_TIMEOUT_MS);
  const locks = await openKv<{ owner: string }>(bus, { name: 'refresh_locks', ttlMs: wantedLockTtlMs });
  // A bucket made before keeps the TTL it was made with: the refresher works with the real one.
  const lockTtlMs = (await locks.kv.status()).ttl || wantedLockTtlMs;
  if (lockTtlMs < wantedLockTtlMs) {
    logger.warn('the refresh_locks bucket expires locks sooner than REFRESH_TIMEOUT_MS needs; recreate it or lower the timeout', { lockTtlMs, wantedLockTtlMs });
  }
  // Writes to one connection or integration go one at a time across replicas (see
  // serialized-writes), under keys of their own bucket: a refresh lock must outlive a call to a
  // provider, a write key only its holder. Writes anywhere drop the cached copy everywhere; a
  // replica cut off from NATS forgets all.
  const writeLocks = createKvLocks(await openKv<{ owner: string }>(bus, { name: 'vault_write_locks', ttlMs: WRITE_KEYS.ttlMs }));
  const integrations = serializedIntegrationWrites(createIntegrationRepo(mongo), writeLocks);
  const connections = announcingWrites(serializedConnectionWrites(createConnectionRepo(mongo), writeLocks), (id) => {
    cache.invalidate(id);
    bus.broadcast(vaultContracts.connectionChanged, { id });
  });
  bus.onBroadcast(vaultContracts.connectionChanged, ({ id }) => cache.invalidate(id));
  bus.onReconnect(() => cache.clear());
  const dataKeys = createDataKeyRepo(mongo);
  const reads = createCredentialReadRepo(mongo);
  const sessions = createConnectSessionRepo(mongo);
  const oauthSessions = createOAuthSessionRepo(mongo);
  const logs = createRefreshLogRepo(mongo);
  const answers = createRefreshAnswerRepo(mongo);
  const outbox = createLifecycleOutboxRepo(mongo);
  await Promise.all([integrations.init(), connections.init(), dataKeys.init(), reads.init(), logs.init(), answers.init(), sessions.init(), oauthSessions.init(), outbox.init()]);
  // Connections stored before lookups by name went by _id get their key entry (see connection-repo).
  await connections.indexKeys();
  // And connections stored before the lists get their place in them (see connection-lists).
  await connections.indexLists();

  // Connect sessions and OAuth flows nobody came back to (each may hold a customer's OAuth
  // client) go once expired: every replica sweeps (idempotent deletes), at start and every few minutes.
  const sweepSessions = () => {
    const now = new Date();
    void Promise.all([sessions.removeExpired(now), oauthSessions.removeExpired(now)]).then(
      ([expiredSessions, expiredFlows]) => {
        if (expiredSessions + expiredFlows > 0) logger.debug('swept expired connect sessions', { sessions: expiredSessions, oauth_flows: expiredFlows });
      },
      (error: unknown) => logger.warn('could not sweep expired connect sessions; trying again later', { error }),
    );
  };
  sweepSessions();
  const sessionSweep = setInterval(sweepSessions, SESSION_SWEEP_MS).unref();
  runtime.onShutdown(() => clearInterval(sessionSweep));

  // Lifecycle facts a replica kept but never published (it died, or lost NATS) go out from any
  // replica's sweep; two replicas sending one fact send its one msgId, stored once.
  const lifecycle = createLifecycleEvents({ bus, logger, outbox, connections, integrations });
  const sweepOutbox = () => {
    void lifecycle.sweep().then(
      (published) => {
        if (published > 0) logger.warn('published lifecycle facts a replica had left unpublished', { facts: published });
      },
      (error: unknown) => logger.warn('could not sweep the lifecycle outbox; trying again later', { error }),
    );
  };
  const outboxSweep = setInterval(sweepOutbox, OUTBOX_SWEEP_MS).unref();
  runtime.onShutdown(() => clearInterval(outboxSweep));

  // Token endpoints are reached under the proxy's address policy and its operator allow-list.
  const http = createHttpClient({ policy: createAddressPolicy({ allowCidrs: parseCidrList(config.PROXY_ALLOW_CIDRS) }) });
  runtime.onShutdown(() => http.close());
  const keyring = createKeyring({ keks: config.ENCRYPTION_KEYS, dataKeys, sealingVersion: config.ENCRYPTION_SEALING_VERSION });
  const audit = countingReads(createReadAudit({ insertMany: reads.insertMany, logger }, { timeoutMs: config.REQUEST_TIMEOUT_MS }));
  const base = { bus, logger, integrations, connections, cipher: keyring, providers: catalog, logoUrl: (name: string) => logoUrl(name, catalog.get(name), config.PUBLIC_URL) };
  const integrationService = createIntegrationService({ integrations, cipher: keyring });
  const credentials = createConnectionCredentials({ cipher: keyring });
  // The operations log: refreshes and connect-flow steps.
  const operations = busOperationLog(bus, logger, 'credential-vault');
  runtime.onShutdown(() => operations.flush());
  const refresher = createRefresher({
    ...base,
    operations,
    credentials,
    integrationService,
    locks,
    logs,
    answers,
    timeoutMs: config.REFRESH_TIMEOUT_MS,
    http,
    lockTtlMs,
  });
  const connectionService = createConnectionService({ bus, logger, cache, refresher, connections, lifecycle, integrations: integrationService, credentials });
  const sessionService = createConnectSessionService({
    lifecycle,
    providers: catalog,
    sessions,
    connections,
    integrationService,
    credentials,
  });
  const deps: VaultDeps & VaultServices = { ...base, refresher, audit, cache, integrationService, connectionService, sessionService, lifecycle };
  runtime.onShutdown(() => audit.stop());

  const publicCatalog = {
    list: (search?: string) => catalog.list(search).map(([name, entry]) => toPublicProvider(name, entry, config.PUBLIC_URL)),
    get: (name: string) => {
      const entry = catalog.get(name);
      return entry ? toPublicProvider(name, entry, config.PUBLIC_URL) : undefined;
    },
  };
  bus.serve(vaultContracts.listProviders, listProvidersHandler(publicCatalog));
  bus.serve(vaultContracts.getProvider, getProviderHandler(publicCatalog));
  bus.serve(vaultContracts.listIntegrations, listIntegrationsHandler(deps));
  bus.serve(vaultContracts.createIntegration, createIntegrationHandler(deps));
  bus.serve(vaultContracts.getIntegration, getIntegrationHandler(deps));
  bus.serve(vaultContracts.updateIntegration, updateIntegrationHandler(deps));
  bus.serve(vaultContracts.deleteIntegration, deleteIntegrationHandler(deps));
  bus.serve(vaultContracts.createConnection, createConnectionHandler(deps));
  bus.serve(vaultContracts.listConnections, listConnectionsHandler(deps));
  bus.serve(vaultContracts.integrationConnections, integrationConnectionsHandler(deps));
  bus.serve(vaultContracts.getConnection, getConnectionHandler(deps));
  bus.serve(vaultContracts.resolveConnection, resolveConnectionHandler(deps));
  bus.serve(vaultContracts.patchConnection, patchConnectionHandler(deps));
  bus.serve(vaultContracts.deleteConnection, deleteConnectionHandler(deps));
  bus.serve(vaultContracts.writeMetadata, writeMetadataHandler(deps));
  bus.serve(vaultContracts.createConnectSession, createConnectSessionHandler({ ...deps, sessions }));
  bus.serve(vaultContracts.getConnectSession, getConnectSessionHandler(deps));
  bus.serve(vaultContracts.deleteConnectSession, deleteConnectSessionHandler({ sessions }));
  const oauthDeps = { ...deps, oauthSessions, catalog, timeoutMs: config.REFRESH_TIMEOUT_MS, http };
  // Steps named by a session token belong to its environment; the OAuth callbacks say theirs.
  const bySession = async (request: { token: string; integration: string }, answer: { connectionId: string } | undefined) => {
    const session = await sessionService.live({ token: request.token });
    return { environment_id: session.environment_id, integration_id: request.integration, ...(answer ? { connection_id: answer.connectionId } : {}) };
  };
  const byAnswer = async (_request: unknown, answer: { connectionId: string; providerConfigKey: string; environment_id?: string | undefined } | undefined) =>
    answer?.environment_id === undefined ? undefined : { environment_id: answer.environment_id, integration_id: answer.providerConfigKey, connection_id: answer.connectionId };
  bus.serve(vaultContracts.connectWithSession, recordedHandler(operations, 'connect', connectWithSessionHandler(oauthDeps), bySession));
  bus.serve(vaultContracts.connectClientCredentials, recordedHandler(operations, 'connect', connectClientCredentialsHandler(oauthDeps), bySession));
  bus.serve(vaultContracts.startOAuth, recordedHandler(operations, 'connect', startOAuthHandler(oauthDeps), (request) => bySession(request, undefined)));
  bus.serve(vaultContracts.finishOAuth, recordedHandler(operations, 'connect', finishOAuthHandler(oauthDeps), byAnswer));
  bus.serve(vaultContracts.finishOAuth1, recordedHandler(operations, 'connect', finishOAuth1Handler(oauthDeps), byAnswer));
  bus.serve(vaultContracts.refuseOAuth, refuseOAuthHandler(oauthDeps));
  bus.serve(proxyContracts.getCredentials, proxyCredentialsHandler({ ...deps, catalog }));
  bus.serve(vaultWebhookContracts.webhookIntegration, webhookIntegrationHandler(deps));
  bus.serve(vaultWebhookContracts.matchConnection, matchConnectionHandler(deps));
  bus.serve(vaultWebhookContracts.matchConnections, matchConnectionsHandler(deps));
  bus.serve(vaultContracts.rotateKeys, rotateKeysHandler({ connections, integrations, logger, keyring, locks: writeLocks }));
  // Sync runs mark (and clear) a connection's sync errors; facts from now on, not the history.
  const syncRuns = await Promise.all(
    (['failed', 'completed'] as const).map((outcome) =>
      consume({
        bus,
        logger,
        stream: STREAMS.events.name,
        durable: `credential-vault-sync-${outcome}`,
        contract: outcome === 'failed' ? syncContracts.runFailed : syncContracts.runCompleted,
        concurrency: 8,
        deliverPolicy: 'new',
        handler: syncRunHandler(deps, outcome),
      }),
    ),
  );
  runtime.onShutdown(() => Promise.all(syncRuns.map((consumer) => consumer.stop())).then(() => undefined));
  // Connections stored before the search lists get their grams' entries in the background (34
  // appends for a UUID: minutes to hours for a large database); searches walk the other lists
  // until it has finished. Stopped at shutdown; the next start carries on.
  const stopGrams = new AbortController();
  const grams = connections.indexGrams({ signal: stopGrams.signal }).then(
    (entered) => {
      if (entered > 0) logger.info('gave older connections their search lists', { connections: entered });
    },
    (error: unknown) => {
      logger.error('giving older connections their search lists failed; the next start carries on', { error });
    },
  );
  runtime.onShutdown(() => {
    stopGrams.abort();
    return grams;
  });
  const backfilled = await integrationService.backfillWebhookSecrets();
  if (backfilled > 0) logger.info('gave older integrations their webhook secrets', { integrations: backfilled });
  logger.info('catalog loaded', { providers: catalog.size });
}
