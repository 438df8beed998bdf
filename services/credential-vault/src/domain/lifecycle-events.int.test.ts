import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { STREAMS, vaultContracts, webhookContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createKeyring } from '../crypto/keyring.js';
import { createConnectionRepo, credentialsVersionOf, type ConnectionRepo } from '../db/connection-repo.js';
import { createDataKeyRepo } from '../db/data-key-repo.js';
import { createIntegrationRepo, type IntegrationRepo } from '../db/integration-repo.js';
import { createLifecycleOutboxRepo, type LifecycleOutboxRepo } from '../db/lifecycle-outbox-model.js';
import { createConnectionCredentials } from './connection-credentials.js';
import { creationEvents, insertConnection } from './connections.js';
import { createLifecycleEvents, type LifecycleEvents } from './lifecycle-events.js';
import { connectionEvent } from './views.js';

/**
 * A replica that stores a connection and dies, or loses NATS, before JetStream has its
 * `connection.created`: the sync-scheduler never schedules the connection's syncs, the
 * post-creation functions never run, the customer never hears of it. And a deletion announced
 * that way leaves the connection's records and schedules behind. The replica here has lost
 * NATS (its bus is closed); another replica, sharing the database, sweeps.
 */
const logger = createLogger({ service: 'test', silent: true });
const keks = [{ version: 'v1', key: randomBytes(32) }];
const integration = { _id: 'int_outbox', unique_key: 'crm', provider: 'hubspot' };
const MINUTE_AND_A_HALF = 91_000;

let nats: TestNats;
let mongo: TestMongo;
let db: Connection;
let live: Bus;
let cutOff: Bus;
let connections: ConnectionRepo;
let integrations: IntegrationRepo;
let outbox: LifecycleOutboxRepo;
let alive: LifecycleEvents;
let dying: LifecycleEvents;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  live = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  await ensureStreams(live);
  cutOff = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 1_000 });
  await cutOff.close();
  db = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('vault_outbox'), logger });
  connections = createConnectionRepo(db);
  integrations = createIntegrationRepo(db);
  outbox = createLifecycleOutboxRepo(db);
  await Promise.all([connections.init(), integrations.init(), outbox.init(), createDataKeyRepo(db).init()]);
  alive = createLifecycleEvents({ bus: live, logger, outbox, connections, integrations });
  dying = createLifecycleEvents({ bus: cutOff, logger, outbox, connections, integrations, publishRetryMs: 300 });
}, 60_000);

afterAll(async () => {
  await db?.close();
  await live?.drain();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

const later = () => new Date(Date.now() + MINUTE_AND_A_HALF);

/** The newest fact JetStream stored on `subject`, as its payload. */
async function lastStored(subject: string): Promise<Record<string, unknown> | undefined> {
  const jsm = await live.jetstreamManager();
  const message = await jsm.streams.getMessage(STREAMS.events.name, { last_by_subj: subject }).catch(() => undefined);
  return message ? (message.json() as Record<string, unknown>) : undefined;
}

async function stored(environment: string, lifecycle: LifecycleEvents, connectionId: string) {
  const credentials = createConnectionCredentials({ cipher: createKeyring({ keks, dataKeys: createDataKeyRepo(db) }) });
  // The integration is not stored: the outbox is this test's subject, not the integration's keys.
  const unchecked = { storing: <T>(_environment: unknown, _integration: unknown, store: () => Promise<T>) => store() };
  return insertConnection(
    { connections, credentials, lifecycle, integrations: unchecked },
    environmentId(environment),
    integration,
    { type: 'API_KEY', apiKey: 'k' },
    { connection_id: connectionId, metadata: {}, connection_config: {}, tags: {}, end_user: null, created_via_session: false },
    (doc) => creationEvents(doc),
  );
}

it('publishes, from another replica, the creation a replica stored and could not announce', async () => {
  const environment = `env_${randomBytes(4).toString('hex')}`;
  // The write stands: the caller is answered, its facts wait in the outbox.
  const doc = await stored(environment, dying, 'stranded');
  expect(await connections.findById(environmentId(environment), doc._id)).not.toBeNull();

  // Not before the writer's own tries are over.
  expect(await alive.sweep()).toBe(0);
  expect(await alive.sweep(later())).toBe(2);
  expect(await lastStored(vaultContracts.connectionCreated.subject)).toMatchObject({ environment_id: environment, id: doc.id, connection_id: 'stranded' });
  expect(await lastStored(webhookContracts.postCreation.subject)).toMatchObject({ environment_id: environment, id: doc.id });
  // Once.
  expect(await alive.sweep(later())).toBe(0);
});

it('announces nothing for a write that never happened, and drops its fact', async () => {
  const environment = `env_${randomBytes(4).toString('hex')}`;
  const doc = await stored(environment, alive, 'kept');
  await outbox.drop((await outbox.olderThan(later(), 100)).map((entry) => entry._id));
  // A replica kept `connection.deleted` and died before the deletion.
  await outbox.keep([
    { _id: 'fact-of-a-deletion-never-made', environment_id: environment, connection: doc._id, holds_when: 'absent', subject: vaultContracts.connectionDeleted.subject, payload: connectionEvent(doc), at: new Date() },
  ]);
  // And one kept `connection.created` for an insert that never happened.
  await outbox.keep([
    { _id: 'fact-of-an-insert-never-made', environment_id: environment, connection: 'conn_never', holds_when: 'present', subject: vaultContracts.connectionCreated.subject, payload: { ...connectionEvent(doc), id: 7 }, at: new Date() },
  ]);
  // And one kept the override of a reconnect whose new credentials it never wrote: the
  // connection is there (it was before), but still at the version the reconnect read.
  await outbox.keep([
    {
      _id: 'fact-of-a-reconnect-never-made',
      environment_id: environment,
      connection: doc._id,
      holds_when: 'present',
      credentials_version_above: credentialsVersionOf(doc),
      subject: vaultContracts.connectionCreated.subject,
      payload: { ...connectionEvent(doc), id: 8, operation: 'override' },
      at: new Date(),
    },
  ]);
  const before = await lastStored(vaultContracts.connectionDeleted.subject);
  expect(await alive.sweep(later())).toBe(0);
  expect(await outbox.olderThan(later(), 100)).toEqual([]);
  expect(await lastStored(vaultContracts.connectionDeleted.subject)).toEqual(before);
  expect([7, 8]).not.toContain((await lastStored(vaultContracts.connectionCreated.subject))?.['id']);
});

it('publishes, from another replica, the deletion a replica made and could not announce', async () => {
  const environment = `env_${randomBytes(4).toString('hex')}`;
  const doc = await stored(environment, alive, 'doomed');
  const removed = await dying.announce(doc, { when: 'absent' }, [{ contract: vaultContracts.connectionDeleted, payload: connectionEvent(doc) }], () =>
    connections.remove(environmentId(environment), doc._id),
  );
  expect(removed).toBe(true);
  expect(await alive.sweep(later())).toBe(1);
  expect(await lastStored(vaultContracts.connectionDeleted.subject)).toMatchObject({ environment_id: environment, id: doc.id, connection_id: 'doomed' });
});

it('drops the facts of a change that failed or changed nothing', async () => {
  const environment = `env_${randomBytes(4).toString('hex')}`;
  const doc = await stored(environment, alive, 'twice');
  await expect(stored(environment, alive, 'twice')).rejects.toMatchObject({ code: 'invalid_body' });
  expect(await alive.announce(doc, { when: 'present' }, creationEvents(doc), async () => false)).toBe(false);
  expect(await outbox.olderThan(later(), 100)).toEqual([]);
});

/** An integration stored under `key` in `environment`, as the vault stores one. */
async function storedIntegration(environment: string, key: string) {
  const now = new Date();
  return integrations.insert(environmentId(environment), {
    _id: `int_${randomBytes(6).toString('hex')}`,
    unique_key: key,
    provider: 'hubspot',
    display_name: null,
    credentials: null,
    integration_config: {},
    custom: {},
    forward_webhooks: true,
    accept_unsigned_webhooks: false,
    allowed_hosts: [],
    webhook_secret: null,
    created_at: now,
    updated_at: now,
  });
}

it("publishes, from another replica, the end of an integration's key a replica deleted or renamed and could not announce", async () => {
  // Left unannounced, the key's deployed functions would stay, and a new integration of the
  // key would run the old one's syncs and actions.
  const environment = `env_${randomBytes(4).toString('hex')}`;
  const deleted = await storedIntegration(environment, 'crm-deleted');
  await dying.announceKeyEnd(deleted, () => integrations.remove(environmentId(environment), deleted._id));
  expect(await integrations.findById(environmentId(environment), deleted._id)).toBeNull();
  expect(await alive.sweep()).toBe(0);
  expect(await alive.sweep(later())).toBe(1);
  expect(await lastStored(vaultContracts.integrationRemoved.subject)).toMatchObject({ environment_id: environment, unique_key: 'crm-deleted' });

  const renamed = await storedIntegration(environment, 'crm-old-name');
  await dying.announceKeyEnd(renamed, () => integrations.update(environmentId(environment), renamed._id, { unique_key: 'crm-new-name' }));
  expect(await alive.sweep(later())).toBe(1);
  expect(await lastStored(vaultContracts.integrationRemoved.subject)).toMatchObject({ environment_id: environment, unique_key: 'crm-old-name' });
  expect(await alive.sweep(later())).toBe(0);
});

it("announces no key's end for an integration still there under its key", async () => {
  const environment = `env_${randomBytes(4).toString('hex')}`;
  const kept = await storedIntegration(environment, 'crm-kept');
  // A replica kept the fact and died before the deletion.
  await outbox.keep([
    {
      _id: 'fact-of-an-integration-deletion-never-made',
      environment_id: environment,
      integration: kept._id,
      holds_when: 'absent',
      subject: vaultContracts.integrationRemoved.subject,
      payload: { environment_id: environment, unique_key: 'crm-kept', at: new Date().toISOString() },
      at: new Date(),
    },
  ]);
  const before = await lastStored(vaultContracts.integrationRemoved.subject);
  expect(await alive.sweep(later())).toBe(0);
  expect(await outbox.olderThan(later(), 100)).toEqual([]);
  expect(await lastStored(vaultContracts.integrationRemoved.subject)).toEqual(before);
});
