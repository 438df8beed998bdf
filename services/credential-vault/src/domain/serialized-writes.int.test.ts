import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { connectionFixture } from '../db/connection-fixture.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import { createIntegrationRepo, type IntegrationRepo } from '../db/integration-repo.js';
import { serializedConnectionWrites, serializedIntegrationWrites, writeLockKey } from './serialized-writes.js';

const logger = createLogger({ service: 'test', level: 'error' });
const environment = environmentId('env_writes');
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two vault replicas' repositories: one database, one lock bucket, each its own wrapper. */
let replicas: ConnectionRepo[];
/** A third replica that waits 300 ms at most for the write before its own (both above wait 10 s, as the vault does). */
let impatient: ConnectionRepo;
/** And their integration repositories. */
let integrationReplicas: IntegrationRepo[];
let locks: ReturnType<typeof createKvLocks>;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `write_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('writes'), logger });
  const repo = createConnectionRepo(connection);
  await repo.init();
  replicas = [serializedConnectionWrites(repo, locks), serializedConnectionWrites(createConnectionRepo(connection), locks)];
  impatient = serializedConnectionWrites(createConnectionRepo(connection), locks, { waitMs: 300 });
  const integrations = createIntegrationRepo(connection);
  await integrations.init();
  integrationReplicas = [serializedIntegrationWrites(integrations, locks), serializedIntegrationWrites(createIntegrationRepo(connection), locks)];
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

let next = 0;
async function stored(): Promise<string> {
  next += 1;
  const doc = connectionFixture({ _id: `conn_w${next}`, id: next, provider_config_key: 'crm', connection_id: `w${next}` });
  await replicas[0]!.insert(environment, doc);
  return doc._id;
}

describe('writes to one connection from two replicas at once', () => {
  it('let exactly one compare-and-set of the credentials win, and keep its credentials', async () => {
    const id = await stored();
    const wins = await Promise.all(
      Array.from({ length: 8 }, (_, i) => replicas[i % 2]!.replaceCredentials(environment, id, 0, { credentials: `blob-${i}`, updated_at: new Date() })),
    );
    expect(wins.filter(Boolean)).toHaveLength(1);
    const doc = await replicas[0]!.findById(environment, id);
    expect(doc).toMatchObject({ credentials: `blob-${wins.indexOf(true)}`, credentials_version: 1 });
  }, 30_000);

  it('keep a refresh\'s new credentials while other fields are written around it', async () => {
    const id = await stored();
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => replicas[i % 2]!.update(environment, id, { last_fetched_at: new Date(), [`metadata.k${i}`]: i } as never)),
      replicas[1]!.replaceCredentials(environment, id, 0, { credentials: 'refreshed', updated_at: new Date() }),
      replicas[0]!.recordSyncRun(environment, id, 'contacts:base', { failed_run: null, finished_at: new Date() }),
    ]);
    const doc = await replicas[0]!.findById(environment, id);
    expect(doc).toMatchObject({ credentials: 'refreshed', credentials_version: 1 });
    expect(Object.keys(doc!.metadata ?? {})).toHaveLength(10);
    expect(doc!.sync_runs?.['contacts:base']).toMatchObject({ failed_run: null });
  }, 30_000);

  it('answer service_unavailable, changing nothing, when the write before does not finish in time', async () => {
    const id = await stored();
    const held = await locks.acquire(writeLockKey(id));
    try {
      await expect(impatient.update(environment, id, { tags: { team: 'late' } })).rejects.toMatchObject({ code: 'service_unavailable' });
    } finally {
      await locks.release(held!);
    }
    expect((await replicas[0]!.findById(environment, id))!.tags).toEqual({});
    expect(await impatient.update(environment, id, { tags: { team: 'late' } })).toBe(true);
  }, 30_000);
});

describe('the start-up backfill of the lists', () => {
  it("keeps a refresh's new credentials stored while it marks the connection listed", async () => {
    // Connections an older replica stored (not `listed`), refreshed by a serving replica while a
    // starting one lists them: on FerretDB an unserialized mark writes back the copy it read.
    for (let round = 0; round < 5; round++) {
      const ids = await Promise.all(Array.from({ length: 8 }, () => stored()));
      await connection.db!.collection<{ _id: string }>('connections').updateMany({ _id: { $in: ids } }, { $unset: { listed: '' } });
      await Promise.all([
        replicas[0]!.indexLists(),
        ...ids.map((id) => replicas[1]!.replaceCredentials(environment, id, 0, { credentials: 'refreshed', updated_at: new Date() })),
      ]);
      for (const id of ids) expect(await replicas[0]!.findById(environment, id)).toMatchObject({ credentials: 'refreshed', credentials_version: 1, listed: true });
    }
  }, 60_000);
});

describe('writes to one integration from two replicas at once', () => {
  it('give an older integration one webhook secret, and keep an edit made while its client secret is re-encrypted', async () => {
    const now = new Date();
    const integration = await integrationReplicas[0]!.insert(environment, {
      _id: 'int_race',
      unique_key: 'race',
      provider: 'crm',
      display_name: null,
      credentials: 'sealed-v1',
      integration_config: {},
      custom: {},
      forward_webhooks: false,
      accept_unsigned_webhooks: false,
      allowed_hosts: [],
      webhook_secret: null,
      created_at: now,
      updated_at: now,
    });
    // Two replicas reading it at once each make a secret: the first stored is the one.
    const set = await Promise.all(Array.from({ length: 6 }, (_, i) => integrationReplicas[i % 2]!.setWebhookSecretIfMissing(environment, integration._id, `secret-${i}`)));
    expect(set.filter(Boolean)).toHaveLength(1);
    await Promise.all([
      integrationReplicas[0]!.swapField(environment, integration._id, 'credentials', 'sealed-v1', 'sealed-v2'),
      ...Array.from({ length: 6 }, (_, i) => integrationReplicas[1]!.update(environment, integration._id, { custom: { [`k${i}`]: 'v' }, display_name: `name ${i}` })),
    ]);
    const stored = await integrationReplicas[0]!.findByKey(environment, 'race');
    expect(stored).toMatchObject({ credentials: 'sealed-v2', webhook_secret: `secret-${set.indexOf(true)}` });
    expect(stored!.display_name).toMatch(/^name \d$/);
  }, 30_000);
});
