import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, createOperationLog, ensureStreams, openKv, WRITE_KEYS, type Bus, type KvLocks } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { createAddressPolicy, createHttpClient } from '@latchkey/net';
import { eventually, startMongo, startNats, startTcpRelay, uniqueDbName, type TestMongo, type TestNats, type TestTcpRelay } from '@latchkey/testing';
import { loadCatalog } from '../catalog/load-catalog.js';
import { createKeyring } from '../crypto/keyring.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import { createCredentialReadRepo } from '../db/credential-read-repo.js';
import { createDataKeyRepo } from '../db/data-key-repo.js';
import { createIntegrationRepo, type IntegrationRepo } from '../db/integration-repo.js';
import { createLifecycleOutboxRepo } from '../db/lifecycle-outbox-model.js';
import { createRefreshAnswerRepo } from '../db/refresh-answer-model.js';
import { createRefreshLogRepo } from '../db/refresh-log-repo.js';
import { announcingWrites, createConnectionCache } from '../domain/connection-cache.js';
import { createConnectionCredentials } from '../domain/connection-credentials.js';
import { createConnectionService } from '../domain/connections.js';
import { createIntegrationService } from '../domain/integrations.js';
import { createLifecycleEvents } from '../domain/lifecycle-events.js';
import { createReadAudit } from '../domain/read-audit.js';
import { serializedConnectionWrites, serializedIntegrationWrites } from '../domain/serialized-writes.js';
import { createRefresher } from '../refresh/refresher.js';
import { createConnectionHandler, getConnectionHandler } from './connections.js';
import { createIntegrationHandler, deleteIntegrationHandler, updateIntegrationHandler } from './integrations.js';

/**
 * Two vault replicas at once, each wired as start-vault wires it, on one database, one NATS and
 * one bucket of write keys; a replica's repositories may be wrapped to land another replica's
 * change at the moment a race needs it.
 */
const logger = createLogger({ service: 'test', silent: true });
const keks = [{ version: 'v1', key: randomBytes(32) }];
const catalog = loadCatalog();
const writeLocksBucket = `vault_write_locks_${randomBytes(4).toString('hex')}`;
const refreshLocksBucket = `refresh_locks_${randomBytes(4).toString('hex')}`;

let nats: TestNats;
let mongo: TestMongo;
let db: Connection;
let bus: Bus;
/** A second NATS connection, through a relay that can hold what it sends (a replica paused, or its network slow). */
let natsRelay: TestTcpRelay;
let relayedBus: Bus;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  natsRelay = await startTcpRelay({ port: Number(new URL(nats.url).port) });
  // Test buckets are no service's: the test server's observer may open them.
  const login = (servers: string) => createBus({ servers, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  bus = await login(nats.url);
  relayedBus = await login(`nats://127.0.0.1:${natsRelay.port}`);
  await ensureStreams(bus);
  db = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('vault_races'), logger });
  await Promise.all([
    createConnectionRepo(db).init(),
    createIntegrationRepo(db).init(),
    createDataKeyRepo(db).init(),
    createCredentialReadRepo(db).init(),
    createRefreshLogRepo(db).init(),
    createRefreshAnswerRepo(db).init(),
    createLifecycleOutboxRepo(db).init(),
  ]);
}, 60_000);

afterAll(async () => {
  await relayedBus?.close().catch(() => undefined);
  await natsRelay?.close();
  await bus?.drain();
  await db?.dropDatabase();
  await db?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

interface ReplicaOptions {
  /** The NATS connection its write keys go through. */
  bus?: Bus;
  /** Wraps its connection repository (serialized, as the vault's). */
  connections?: (repo: ConnectionRepo) => ConnectionRepo;
  /** Wraps the KV locks its write keys are taken with. */
  locks?: (locks: KvLocks) => KvLocks;
}

/** A vault replica: its handlers, and the writes to connections it has made (the ids, in order). */
async function replica(options: ReplicaOptions = {}) {
  const replicaBus = options.bus ?? bus;
  const kvLocks = createKvLocks(await openKv<{ owner: string }>(replicaBus, { name: writeLocksBucket, ttlMs: WRITE_KEYS.ttlMs }));
  const writeLocks = options.locks ? options.locks(kvLocks) : kvLocks;
  const cache = createConnectionCache({ ttlMs: 30_000, maxEntries: 1_000 });
  const written: string[] = [];
  const integrations = serializedIntegrationWrites(createIntegrationRepo(db), writeLocks);
  const serialized = serializedConnectionWrites(createConnectionRepo(db), writeLocks);
  const connections = announcingWrites(options.connections ? options.connections(serialized) : serialized, (id) => {
    cache.invalidate(id);
    written.push(id);
  });
  const keyring = createKeyring({ keks, dataKeys: createDataKeyRepo(db) });
  const integrationService = createIntegrationService({ integrations, cipher: keyring });
  const credentials = createConnectionCredentials({ cipher: keyring });
  const lifecycle = createLifecycleEvents({ bus, logger, outbox: createLifecycleOutboxRepo(db), connections, integrations });
  const refresher = createRefresher({
    bus,
    logger,
    integrations,
    connections,
    providers: catalog,
    credentials,
    integrationService,
    locks: await openKv<{ owner: string }>(bus, { name: refreshLocksBucket, ttlMs: 30_000 }),
    logs: createRefreshLogRepo(db),
    answers: createRefreshAnswerRepo(db),
    timeoutMs: 5_000,
    http: createHttpClient({ policy: createAddressPolicy({ allowCidrs: [] }) }),
    lockTtlMs: 30_000,
    operations: createOperationLog({ logger, flushMs: 1, send: async () => undefined }),
  });
  const connectionService = createConnectionService({ bus, logger, cache, refresher, connections, lifecycle, integrations: integrationService, credentials });
  const audit = createReadAudit({ insertMany: createCredentialReadRepo(db).insertMany, logger }, { timeoutMs: 5_000 });
  const deps = { bus, logger, integrations, connections, providers: catalog, logoUrl: () => '', audit, integrationService, connectionService, lifecycle };
  return {
    written,
    createIntegration: createIntegrationHandler(deps),
    updateIntegration: updateIntegrationHandler(deps),
    deleteIntegration: deleteIntegrationHandler(deps),
    createConnection: (environment_id: string, provider_config_key: string, connection_id: string) =>
      createConnectionHandler(deps)(
        { environment_id, provider_config_key, connection_id, reader: { key_id: 'key-1' }, include_credentials: false, credentials: { type: 'API_KEY', apiKey: 'k' } },
        { subject: `${vaultContracts.createConnection.subject}.gateway` },
      ),
    getConnection: (() => {
      const handler = getConnectionHandler(deps);
      return (environment_id: string, provider_config_key: string, connection_id: string) =>
        handler(
          { environment_id, provider_config_key, connection_id, reader: { key_id: 'key-1' }, include_credentials: false, include_refresh_token: false, force_refresh: false, refresh_vendor_app_jwt_token: false },
          { subject: `${vaultContracts.getConnection.subject}.gateway` },
        );
    })(),
  };
}

const newEnvironment = () => `env_${randomBytes(4).toString('hex')}`;

describe('last_fetched_at', () => {
  // Each fetch stamps its own time, written behind the answer. Two replicas' stamps may land in
  // either order: the later fetch's time must stay, whichever lands last.
  it('keeps the later fetch, when an earlier fetch on another replica is stored after it', async () => {
    const environment_id = newEnvironment();
    const [slow, quick] = await Promise.all([replica({ bus: relayedBus }), replica()]);
    await quick.createIntegration({ environment_id, provider: 'anthropic', unique_key: 'llm' });
    const { id } = await quick.createConnection(environment_id, 'llm', 'stamped');
    const stored = () => createConnectionRepo(db).find(environmentId(environment_id), 'llm', 'stamped');

    // The slow replica answers its fetch; its stamp waits in the relay for the connection's write key.
    const earlier = await slow.getConnection(environment_id, 'llm', 'stamped');
    natsRelay.hold();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const later = await quick.getConnection(environment_id, 'llm', 'stamped');
    expect(Date.parse(later.last_fetched_at!)).toBeGreaterThan(Date.parse(earlier.last_fetched_at!));
    await eventually(async () => ((await stored())?.last_fetched_at?.toISOString() === later.last_fetched_at ? true : undefined), 10_000, "the quick replica's stamp", 20);

    // Then the earlier stamp lands.
    natsRelay.release();
    await eventually(() => (slow.written.length > 0 ? true : undefined), 10_000, "the slow replica's stamp", 20);
    expect((await stored())!.last_fetched_at!.toISOString()).toBe(later.last_fetched_at);
    expect((await stored())!.id).toBe(id);
  }, 30_000);
});

/** Connections no integration owns: the integration their key names now is not theirs, or there is none. */
async function orphans(environment_id: string): Promise<string[]> {
  const environment = environmentId(environment_id);
  const integrations = createIntegrationRepo(db);
  const found: string[] = [];
  for (const doc of await createConnectionRepo(db).listAll(environment)) {
    const owner = await integrations.findByKey(environment, doc.provider_config_key);
    if (owner?._id !== doc.integration_id) found.push(`${doc.provider_config_key}/${doc.connection_id}`);
  }
  return found;
}

/** Locks that say when a key was found taken (its taker then waits for it). */
function tellingWaits(waited: () => void) {
  return (locks: KvLocks): KvLocks => ({
    ...locks,
    acquire: async (key) => {
      const lock = await locks.acquire(key);
      if (lock === null) waited();
      return lock;
    },
  });
}

/** A promise and its resolver. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

describe("an integration's rename or deletion, racing an import of a connection into it", () => {
  // An import finds the integration by its key, then stores the connection under that key. A
  // rename refuses an integration with connections, then renames it; a deletion deletes its
  // connections, then the integration. Interleaved, a connection was left under a key no
  // integration held, or that a new integration made with the key found as its own.
  const rename = (replica: { updateIntegration: ReturnType<typeof updateIntegrationHandler> }, environment_id: string) =>
    replica.updateIntegration({ environment_id, unique_key: 'crm', patch: { unique_key: 'crm-renamed' } }).catch((error: unknown) => error);
  const remove = (replica: { deleteIntegration: ReturnType<typeof deleteIntegrationHandler> }, environment_id: string) =>
    replica.deleteIntegration({ environment_id, unique_key: 'crm' }).catch((error: unknown) => error);

  it('refuses the import when the rename lands between its check of the integration and its insert', async () => {
    const environment_id = newEnvironment();
    const renamer = await replica();
    let renamed: Promise<unknown> | undefined;
    const importer = await replica({
      connections: (repo) => ({
        ...repo,
        insert: async (...args) => {
          renamed ??= rename(renamer, environment_id);
          await renamed;
          return repo.insert(...args);
        },
      }),
    });
    await renamer.createIntegration({ environment_id, provider: 'anthropic', unique_key: 'crm' });
    const imported = await importer.createConnection(environment_id, 'crm', 'late').catch((error: unknown) => error);
    expect(await renamed).toMatchObject({ unique_key: 'crm-renamed' });
    expect(imported).toMatchObject({ code: 'unknown_provider_config' });
    expect(await orphans(environment_id)).toEqual([]);
  });

  it('renames, and refuses the import, when the import lands between the rename’s count of connections and its write', async () => {
    const environment_id = newEnvironment();
    const waiting = signal();
    const importer = await replica({ locks: tellingWaits(waiting.resolve) });
    let imported: Promise<unknown> | undefined;
    const renamer = await replica({
      connections: (repo) => ({
        ...repo,
        countForIntegration: async (...args) => {
          const count = await repo.countForIntegration(...args);
          imported ??= importer.createConnection(environment_id, 'crm', 'late').catch((error: unknown) => error);
          // Until the import is stored, or waits for the rename.
          await Promise.race([imported, waiting.promise]);
          return count;
        },
      }),
    });
    await renamer.createIntegration({ environment_id, provider: 'anthropic', unique_key: 'crm' });
    expect(await rename(renamer, environment_id)).toMatchObject({ unique_key: 'crm-renamed' });
    expect(await imported).toMatchObject({ code: 'unknown_provider_config' });
    expect(await orphans(environment_id)).toEqual([]);
  });

  it('refuses the import when the deletion lands between its check of the integration and its insert', async () => {
    const environment_id = newEnvironment();
    const deleter = await replica();
    let deleted: Promise<unknown> | undefined;
    const importer = await replica({
      connections: (repo) => ({
        ...repo,
        insert: async (...args) => {
          deleted ??= remove(deleter, environment_id);
          await deleted;
          return repo.insert(...args);
        },
      }),
    });
    await deleter.createIntegration({ environment_id, provider: 'anthropic', unique_key: 'crm' });
    const imported = await importer.createConnection(environment_id, 'crm', 'late').catch((error: unknown) => error);
    expect(await deleted).toEqual({ success: true });
    expect(imported).toMatchObject({ code: 'unknown_provider_config' });
    expect(await orphans(environment_id)).toEqual([]);
  });

  it('deletes the connection too when the import lands between the deletion’s sweep of connections and the integration’s removal', async () => {
    const environment_id = newEnvironment();
    const waiting = signal();
    const importer = await replica({ locks: tellingWaits(waiting.resolve) });
    let imported: Promise<unknown> | undefined;
    const deleter = await replica({
      connections: (repo) => ({
        ...repo,
        listForIntegration: async (...args) => {
          const listed = await repo.listForIntegration(...args);
          imported ??= importer.createConnection(environment_id, 'crm', 'late').catch((error: unknown) => error);
          await Promise.race([imported, waiting.promise]);
          return listed;
        },
      }),
    });
    await deleter.createIntegration({ environment_id, provider: 'anthropic', unique_key: 'crm' });
    await deleter.createConnection(environment_id, 'crm', 'early');
    expect(await remove(deleter, environment_id)).toEqual({ success: true });
    await imported;
    expect(await orphans(environment_id)).toEqual([]);
    expect(await createConnectionRepo(db).listAll(environmentId(environment_id))).toEqual([]);
  });
});
