import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { connectionKeyModel, connectionModel, type ConnectionDoc, type ConnectionKeyDoc } from './connection-model.js';
import { connectionFixture } from './connection-fixture.js';
import { connectionQueries, createConnectionRepo, type ConnectionRepo } from './connection-repo.js';

let mongo: TestMongo;
let connection: Connection;
let repo: ConnectionRepo;

const environment = environmentId('env_conns');
const other = environmentId('env_other');
const doc = (i: number, connectionId = `c${i}`) =>
  connectionFixture({ _id: `conn_${i}`, id: i + 1, provider_config_key: 'github', connection_id: connectionId });

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('connections'), logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createConnectionRepo(connection);
  await repo.init();
  // Enough connections that a scan and a lookup differ in the plan, and another environment's.
  for (let i = 0; i < 300; i += 1) await repo.insert(environment, doc(i));
  await repo.insert(other, doc(1000, 'c5'));
}, 60_000);

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

/**
 * `GET /connections/{id}` on a cache miss and the proxy's credential fetch find a connection by
 * environment, integration and connection id: each step must be an index lookup, explained on the
 * test database (MongoDB, or FerretDB on SQLite or PostgreSQL).
 */
describe('connection lookups are index lookups', () => {
  it('by environment, integration and connection id: two _id lookups', async () => {
    const keys = connectionKeyModel(connection).collection as unknown as driver.Collection<ConnectionKeyDoc>;
    const docs = connectionModel(connection).collection as unknown as driver.Collection<ConnectionDoc>;
    expect(await explainUntilIndexed(() => keys.find(connectionQueries.key(environment, 'github', 'c150')))).toMatchObject({ indexed: true });
    expect(await explainUntilIndexed(() => docs.find(connectionQueries.byId('conn_150')))).toMatchObject({ indexed: true });
    expect(await repo.find(environment, 'github', 'c150')).toMatchObject({ _id: 'conn_150', environment_id: environment });
    // The same connection id in another environment is that environment's.
    expect(await repo.find(other, 'github', 'c5')).toMatchObject({ _id: 'conn_1000' });
    expect(await repo.find(environment, 'gitlab', 'c150')).toBeNull();
    expect(await repo.findById(other, 'conn_150')).toBeNull();
  }, 30_000);

  it('updates by _id (the lookup explained above), only in the connection\'s own environment', async () => {
    expect(await repo.update(environment, 'conn_151', { metadata: { plan: 'gold' } })).toBe(true);
    expect(await repo.findById(environment, 'conn_151')).toMatchObject({ metadata: { plan: 'gold' } });
    expect(await repo.update(other, 'conn_151', { metadata: { plan: 'stolen' } })).toBe(false);
    expect(await repo.update(environment, 'conn_missing', { metadata: {} })).toBe(false);
    expect(await repo.findById(environment, 'conn_151')).toMatchObject({ metadata: { plan: 'gold' } });
  });

  it('lists by connection id with key lookups (explained above), as the query would', async () => {
    const page = { limit: 10, page: 0 };
    const byKeys = await repo.list(environment, { connection_id: 'c150' }, page, ['github', 'gitlab']);
    expect(byKeys.map((item) => item._id)).toEqual(['conn_150']);
    expect(byKeys).toEqual(await repo.list(environment, { connection_id: 'c150' }, page));
    // The other filters apply to what the lookups found.
    expect(await repo.list(environment, { connection_id: 'c150', tags: { team: 'nobody' } }, page, ['github'])).toEqual([]);
    expect(await repo.list(environment, { connection_id: 'c150', end_user_id: 'nobody' }, page, ['github'])).toEqual([]);
    expect(await repo.list(environment, { connection_id: 'c150', search: 'C15' }, page, ['github'])).toHaveLength(1);
    expect(await repo.list(environment, { connection_id: 'c150', provider_config_keys: ['gitlab'] }, page)).toEqual([]);
    // Another environment's connection of the same id is its own.
    expect((await repo.list(other, { connection_id: 'c5' }, page, ['github'])).map((item) => item._id)).toEqual(['conn_1000']);
    expect(await repo.list(environment, { connection_id: 'c150' }, { limit: 10, page: 1 }, ['github'])).toEqual([]);
  });

  it('finds connections stored before the key entries existed, once two replicas have started together', async () => {
    await connectionModel(connection).collection.insertOne({ ...doc(900), environment_id: environment } as never);
    expect(await repo.find(environment, 'github', 'c900')).toBeNull();
    const [first, second] = await Promise.all([repo.indexKeys(), createConnectionRepo(connection).indexKeys()]);
    // Only the missing entry is written (by one replica or both, racing).
    expect(first + second).toBeGreaterThanOrEqual(1);
    expect(first + second).toBeLessThanOrEqual(2);
    expect(await repo.find(environment, 'github', 'c900')).toMatchObject({ _id: 'conn_900' });
    expect(await repo.indexKeys()).toBe(0);
  }, 30_000);

  it('a removed connection is found no more, and its connection id can be taken again', async () => {
    // Another environment's connection stays.
    expect(await repo.remove(other, 'conn_12')).toBe(false);
    expect(await repo.find(environment, 'github', 'c12')).toMatchObject({ _id: 'conn_12' });
    expect(await repo.remove(environment, 'conn_12')).toBe(true);
    expect(await repo.find(environment, 'github', 'c12')).toBeNull();
    await repo.insert(environment, { ...doc(12), _id: 'conn_12b', id: 5000 });
    expect(await repo.find(environment, 'github', 'c12')).toMatchObject({ _id: 'conn_12b' });
  }, 30_000);

  it('refuses a second connection with the same connection id, and keeps finding the first', async () => {
    await expect(repo.insert(environment, { ...doc(20), _id: 'conn_20b', id: 5001 })).rejects.toMatchObject({ code: 'invalid_body' });
    expect(await repo.find(environment, 'github', 'c20')).toMatchObject({ _id: 'conn_20' });
  }, 30_000);
});
