import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { connectionFixture } from '../db/connection-fixture.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import { serializedWrites, writeLockKey } from './connection-writes.js';

const logger = createLogger({ service: 'test', level: 'error' });
const environment = environmentId('env_writes');
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two vault replicas' repositories: one database, one lock bucket, each its own wrapper. */
let replicas: ConnectionRepo[];
let locks: ReturnType<typeof createKvLocks>;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `write_locks_${randomBytes(4).toString('hex')}`, ttlMs: 30_000 }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('writes'), logger });
  const repo = createConnectionRepo(connection);
  await repo.init();
  replicas = [serializedWrites(repo, locks), serializedWrites(createConnectionRepo(connection), locks, { waitMs: 300 })];
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
      await expect(replicas[1]!.update(environment, id, { tags: { team: 'late' } })).rejects.toMatchObject({ code: 'service_unavailable' });
    } finally {
      await locks.release(held!);
    }
    expect((await replicas[0]!.findById(environment, id))!.tags).toEqual({});
    expect(await replicas[1]!.update(environment, id, { tags: { team: 'late' } })).toBe(true);
  }, 30_000);
});
