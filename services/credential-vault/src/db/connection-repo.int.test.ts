import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import mongoose, { type Connection, type mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, watchCommands, type TestMongo, type WatchedConnection } from '@latchkey/testing';
import { connectionListQueries } from './connection-lists.js';
import {
  connectionKeyModel,
  connectionListEntryModel,
  connectionListHeadModel,
  connectionModel,
  type ConnectionDoc,
  type ConnectionKeyDoc,
  type ConnectionList,
  type ConnectionListEntryDoc,
  type ConnectionListHeadDoc,
} from './connection-model.js';
import { connectionFixture } from './connection-fixture.js';
import { connectionQueries, createConnectionRepo, type ConnectionRepo } from './connection-repo.js';

let mongo: TestMongo;
let dbName: string;
let connection: Connection;
let repo: ConnectionRepo;

const environment = environmentId('env_conns');
const other = environmentId('env_other');
const doc = (i: number, connectionId = `c${i}`) =>
  connectionFixture({ _id: `conn_${i}`, id: i + 1, provider_config_key: 'github', connection_id: connectionId });

beforeAll(async () => {
  mongo = await startMongo();
  dbName = uniqueDbName('connections');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createConnectionRepo(connection);
  await repo.init();
  // As the vault's start does: nothing to backfill in a new database, so search reads the gram lists.
  expect(await repo.indexGrams()).toBe(0);
  // Enough connections that a scan and a lookup differ in the plan, and another environment's.
  for (let i = 0; i < 300; i += 1) await repo.insert(environment, doc(i));
  await repo.insert(other, doc(1000, 'c5'));
  // Other environments' key entries and lists, so that PostgreSQL's planner, which reads a
  // table of a few hundred rows whole, has tables worth an index.
  const filler = Array.from({ length: 3000 }, (_, i) => JSON.stringify(['env_filler', 'all', i]));
  await connectionKeyModel(connection).collection.insertMany(filler.map((_id) => ({ _id: `${_id}:key`, connection: 'none' })) as never[]);
  await connectionListHeadModel(connection).collection.insertMany(filler.map((_id) => ({ _id, top: 1 })) as never[]);
  await connectionListEntryModel(connection).collection.insertMany(filler.map((_id) => ({ _id, c: 'none', n: 'none', t: 0 })) as never[]);
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

  it('leaves nothing stored when what it stores under fails after the insert, and the id can be taken again', async () => {
    // The vault's inserts run under the integration's members key: a key lost while the insert
    // ran fails the insert, which another holder (a rename, a deletion) may have missed.
    const lost = new Error('the key was lost while the insert ran');
    await expect(
      repo.insert(environment, { ...doc(400), _id: 'conn_400' }, async (store) => {
        await store();
        throw lost;
      }),
    ).rejects.toBe(lost);
    expect(await repo.findById(environment, 'conn_400')).toBeNull();
    expect(await repo.insert(environment, { ...doc(400), _id: 'conn_400b' })).toMatchObject({ _id: 'conn_400b' });
    expect(await repo.find(environment, 'github', 'c400')).toMatchObject({ _id: 'conn_400b' });
  }, 30_000);
});

const listed = environmentId('env_lists');
/** A connection of the lists' environment: integration `github` when i is even, else `gitlab`; tag team `t<i % 3>`; end user `u<i % 5>`. */
const member = (i: number, fields: Partial<ConnectionDoc> = {}) =>
  connectionFixture(
    { _id: `list_${i}`, id: 10_000 + i, provider_config_key: i % 2 === 0 ? 'github' : 'gitlab', connection_id: `m${i}` },
    { tags: { team: `t${i % 3}` }, end_user: { id: `u${i % 5}` }, created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000), ...fields },
  );
const all = { limit: 1000, page: 0 };
/** The reads of connection documents among watched commands: how many each asked for, and whether whole (no projection). */
const connectionReads = (commands: WatchedConnection['commands']) =>
  commands
    .filter((command) => command.name === 'find' && command.body['find'] === connectionModel(connection).collection.collectionName)
    .map((command) => {
      const id = (command.body['filter'] as { _id: string | { $in: string[] } })._id;
      return { ids: typeof id === 'string' ? 1 : id.$in.length, whole: command.body['projection'] === undefined };
    });
const names = (docs: readonly ConnectionDoc[]) => docs.map((doc) => doc.connection_id);
/** What the list shows, as the old query computed it: the filter on every connection, newest first. */
const expected = (docs: ReadonlyArray<Omit<ConnectionDoc, 'environment_id'>>, keep: (doc: Omit<ConnectionDoc, 'environment_id'>) => boolean) =>
  docs.filter(keep).sort((a, b) => b.created_at.getTime() - a.created_at.getTime()).map((doc) => doc.connection_id);

/**
 * `GET /connections` without a connection id reads the environment's lists: heads and blocks by
 * `_id`, then each entry's connection by `_id`, so a page costs the same however many
 * connections the environment and the database hold.
 */
describe('connection lists are index lookups', () => {
  const members = Array.from({ length: 60 }, (_, i) => member(i));

  beforeAll(async () => {
    for (const doc of members) await repo.insert(listed, doc);
  }, 60_000);

  it("a list's head and its entries: _id lookups", async () => {
    const heads = connectionListHeadModel(connection).collection as unknown as driver.Collection<ConnectionListHeadDoc>;
    const entries = connectionListEntryModel(connection).collection as unknown as driver.Collection<ConnectionListEntryDoc>;
    const shapes: ConnectionList[] = [['all'], ['integration', 'github'], ['tag', 'team', 't1'], ['end_user', 'u2']];
    for (const list of shapes) {
      const head = await explainUntilIndexed(() => heads.find(connectionListQueries.head(listed, list)));
      expect(head.indexed ? 'indexed' : `${list.join(' ')}: ${head.summary}`).toBe('indexed');
      const entry = await explainUntilIndexed(() => entries.find(connectionListQueries.entry(listed, list, 3)));
      expect(entry.indexed ? 'indexed' : `${list.join(' ')}: ${entry.summary}`).toBe('indexed');
    }
  }, 60_000);

  it('every filter lists what the query did, newest first, page by page', async () => {
    expect(names(await repo.list(listed, {}, all))).toEqual(expected(members, () => true));
    expect(names(await repo.list(listed, { provider_config_keys: ['github'] }, all))).toEqual(expected(members, (doc) => doc.provider_config_key === 'github'));
    expect(names(await repo.list(listed, { provider_config_keys: ['github', 'gitlab', 'none'] }, all))).toEqual(expected(members, () => true));
    expect(names(await repo.list(listed, { tags: { team: 't1' } }, all))).toEqual(expected(members, (doc) => doc.tags['team'] === 't1'));
    expect(names(await repo.list(listed, { end_user_id: 'u2' }, all))).toEqual(expected(members, (doc) => doc.end_user?.['id'] === 'u2'));
    expect(names(await repo.list(listed, { search: 'M1' }, all))).toEqual(expected(members, (doc) => doc.connection_id.includes('m1')));
    expect(names(await repo.list(listed, { provider_config_keys: ['gitlab'], tags: { team: 't0' }, end_user_id: 'u3', search: '3' }, all))).toEqual(
      expected(members, (doc) => doc.provider_config_key === 'gitlab' && doc.tags['team'] === 't0' && doc.end_user?.['id'] === 'u3' && doc.connection_id.includes('3')),
    );
    expect(await repo.list(listed, { tags: { team: 'nobody' } }, all)).toEqual([]);
    expect(await repo.list(listed, { provider_config_keys: ['none'] }, all)).toEqual([]);
    const pages = [0, 1, 2, 3].map((page) => repo.list(listed, { provider_config_keys: ['github'] }, { limit: 8, page }));
    expect((await Promise.all(pages)).map(names)).toEqual([0, 1, 2, 3].map((page) => expected(members, (doc) => doc.provider_config_key === 'github').slice(page * 8, page * 8 + 8)));
    // Another environment's connections are its own.
    expect(names(await repo.list(other, {}, all))).toEqual(['c5']);
  }, 30_000);

  it('a change of tags or end user moves the connection; a removed one leaves every list', async () => {
    expect(await repo.update(listed, 'list_4', { tags: { team: 'moved' }, end_user: { id: 'u-moved' } })).toBe(true);
    expect(names(await repo.list(listed, { tags: { team: 'moved' } }, all))).toEqual(['m4']);
    expect(names(await repo.list(listed, { end_user_id: 'u-moved' }, all))).toEqual(['m4']);
    expect(names(await repo.list(listed, { tags: { team: 't1' } }, all))).not.toContain('m4');
    expect(names(await repo.list(listed, { end_user_id: 'u4' }, all))).not.toContain('m4');
    // A reconnect's credentials write carries the merged tags.
    expect(await repo.replaceCredentials(listed, 'list_4', 0, { credentials: 'sealed-2', tags: { team: 'moved', extra: 'x' } })).toBe(true);
    expect(names(await repo.list(listed, { tags: { extra: 'x' } }, all))).toEqual(['m4']);
    expect(await repo.remove(listed, 'list_6')).toBe(true);
    for (const filter of [{}, { provider_config_keys: ['github'] }, { tags: { team: 't0' } }, { end_user_id: 'u1' }, { search: 'm6' }]) {
      expect(names(await repo.list(listed, filter, all))).not.toContain('m6');
    }
  }, 30_000);

  it('concurrent inserts and changes of tags leave each connection in the lists it belongs to', async () => {
    const busy = environmentId('env_busy');
    const many = Array.from({ length: 40 }, (_, i) => member(500 + i));
    // Two replicas, each with its own memory of the lists' last numbers.
    const replica = createConnectionRepo(connection);
    await Promise.all(many.map((doc, i) => (i % 2 === 0 ? repo : replica).insert(busy, doc)));
    expect(names(await repo.list(busy, {}, all))).toEqual(expected(many, () => true));
    expect(names(await repo.list(busy, { end_user_id: 'u0' }, all))).toEqual(expected(many, (doc) => doc.end_user?.['id'] === 'u0'));

    for (let round = 0; round < 5; round++) {
      const values = ['a', 'b', 'c', 'a'].map((value) => `${value}${round}`);
      await Promise.all(values.map((value) => repo.update(listed, 'list_8', { tags: { team: value } })));
      const now = (await repo.findById(listed, 'list_8'))!.tags['team']!;
      expect(names(await repo.list(listed, { tags: { team: now } }, all))).toEqual(['m8']);
      for (const value of values.filter((value) => value !== now)) expect(await repo.list(listed, { tags: { team: value } }, all)).toEqual([]);
    }
  }, 60_000);

  it('entries left behind list nothing: of a connection never stored, of tags it no longer holds, a second one', async () => {
    const entries = connectionListEntryModel(connection).collection as unknown as driver.Collection<ConnectionListEntryDoc>;
    const heads = connectionListHeadModel(connection).collection as unknown as driver.Collection<ConnectionListHeadDoc>;
    /** An entry past the head (the head is a hint a writer raises after its entry). */
    const stray = async (list: ConnectionList, c: string, n: string) => {
      let top = (await heads.findOne(connectionListQueries.head(listed, list)))?.top ?? 0;
      while (await entries.findOne(connectionListQueries.entry(listed, list, top + 1))) top += 1;
      await entries.insertOne({ ...connectionListQueries.entry(listed, list, top + 1), c, n, t: Date.now() });
    };
    // An insert that stopped after its entries; a second entry (two replicas listing one connection).
    await stray(['all'], 'list_never', 'never');
    await stray(['tag', 'team', 't0'], 'list_9', 'm9');
    await stray(['tag', 'team', 'stale'], 'list_10', 'm10');
    expect(names(await repo.list(listed, {}, all))).not.toContain('never');
    expect(names(await repo.list(listed, { tags: { team: 't0' } }, all)).filter((name) => name === 'm9')).toHaveLength(1);
    expect(names(await repo.list(listed, { tags: { team: 't0' } }, all))).toEqual(expected(members, (doc) => doc.tags['team'] === 't0' && doc._id !== 'list_6'));
    expect(await repo.list(listed, { tags: { team: 'stale' } }, all)).toEqual([]);
  }, 30_000);

  it('connections stored before the lists are listed, below newer ones, once two replicas have started together', async () => {
    const older = environmentId('env_older');
    const docs = connectionModel(connection).collection as unknown as driver.Collection<ConnectionDoc>;
    await docs.insertMany([3, 1, 2].map((i) => ({ ...member(100 + i, { created_at: new Date(Date.UTC(2025, 0, i)) }), environment_id: older })));
    expect(await repo.list(older, {}, all)).toEqual([]);
    expect(await repo.indexLists()).toBeGreaterThanOrEqual(3);
    expect(await repo.indexLists()).toBe(0);
    await repo.insert(older, member(200));
    expect(names(await repo.list(older, {}, all))).toEqual(['m200', 'm103', 'm102', 'm101']);
    expect(names(await repo.list(older, { end_user_id: 'u1' }, all))).toEqual(['m101']);
    // Two replicas at once: each connection listed once.
    const both = environmentId('env_older_2');
    await docs.insertMany(Array.from({ length: 20 }, (_, i) => ({ ...member(300 + i), environment_id: both })));
    await Promise.all([repo.indexLists(), createConnectionRepo(connection).indexLists()]);
    const twenty = Array.from({ length: 20 }, (_, i) => member(300 + i));
    expect(names(await repo.list(both, {}, all))).toEqual(expected(twenty, () => true));
    expect(names(await repo.list(both, { tags: { team: 't1' } }, all))).toEqual(expected(twenty, (doc) => doc.tags['team'] === 't1'));
    expect(names(await repo.list(both, {}, { limit: 3, page: 2 }))).toEqual(expected(twenty, () => true).slice(6, 9));
  }, 30_000);

  it('a list sends no query but _id lookups, a search too', async () => {
    // A second connection that reports every command it sends, to the same database.
    const watched = mongoose.createConnection(mongo.uri, { dbName, monitorCommands: true });
    await watched.asPromise();
    const finds: Array<Record<string, unknown>> = [];
    watched.getClient().on('commandStarted', (event) => {
      if (event.commandName === 'find') finds.push(event.command['filter'] as Record<string, unknown>);
    });
    try {
      const watchedRepo = createConnectionRepo(watched);
      for (const filter of [
        {},
        { provider_config_keys: ['github', 'gitlab'] },
        { tags: { team: 't2' } },
        { end_user_id: 'u3' },
        { provider_config_keys: ['gitlab'], tags: { team: 't1' } },
        { search: 'M1' },
        { search: '1' },
        { search: 'm', end_user_id: 'u0' },
      ]) {
        expect((await watchedRepo.list(listed, filter, { limit: 5, page: 1 })).length).toBeGreaterThan(0);
      }
      expect(names(await watchedRepo.list(listed, { search: 'M12' }, { limit: 5, page: 0 }))).toEqual(['m12']);
      expect(names(await watchedRepo.list(listed, { search: 'm25', end_user_id: 'u0' }, { limit: 5, page: 0 }))).toEqual(['m25']);
      // A first page reads about as many entries and connections as it shows, however long the list.
      const recent = environmentId('env_recent');
      for (let i = 0; i < 120; i++) await repo.insert(recent, member(700 + i, { created_at: new Date() }));
      const before = finds.length;
      expect(names(await watchedRepo.list(recent, {}, { limit: 5, page: 0 }))).toEqual(['m819', 'm818', 'm817', 'm816', 'm815']);
      expect(finds.length - before).toBeLessThan(30);
      // A search's too, among the connections of its grams.
      const searchedBefore = finds.length;
      expect(names(await watchedRepo.list(recent, { search: 'M81' }, { limit: 5, page: 0 }))).toEqual(['m819', 'm818', 'm817', 'm816', 'm815']);
      expect(finds.length - searchedBefore).toBeLessThan(30);
      const notById = finds.filter((filter) => Object.keys(filter).join() !== '_id' || !(typeof filter['_id'] === 'string' || Object.keys(filter['_id'] as object).join() === '$in'));
      expect(notById).toEqual([]);
    } finally {
      await watched.close();
    }
  }, 30_000);
  it("an integration's connections, page after page from where the last stopped: each once, each read once", async () => {
    const { connection: watched, commands, close } = await watchCommands(mongo.uri, dbName);
    try {
      const walker = createConnectionRepo(watched);
      // What the list by filter gives (earlier cases removed some members).
      const github = names(await repo.list(listed, { provider_config_keys: ['github'] }, all));
      const seen: string[] = [];
      let before: number | undefined;
      let pages = 0;
      do {
        const page = await walker.integrationPage(listed, 'github', before, 4);
        seen.push(...page.connections.map((doc) => doc.connection_id));
        before = page.next ?? undefined;
        pages += 1;
      } while (before !== undefined && pages < 100);
      // Every connection of the integration once, newest first; no other integration's.
      expect(seen).toEqual(github);
      // Each read once: as many connections read as the integration's list holds entries (a
      // removed one's too), not a page's worth again for each page.
      const connectionsRead = connectionReads(commands).reduce((sum, read) => sum + read.ids, 0);
      expect(connectionsRead).toBeGreaterThanOrEqual(github.length);
      expect(connectionsRead).toBeLessThanOrEqual(github.length + 5);
      // Another environment's are its own.
      expect((await walker.integrationPage(other, 'github', undefined, 10)).connections.map((doc) => doc.connection_id)).toEqual(['c5']);
    } finally {
      await close();
    }
  }, 30_000);

  it('a page deep in a list reads only its own connections whole: those before it, the fields the filter and order need', async () => {
    const { connection: watched, commands, close } = await watchCommands(mongo.uri, dbName);
    try {
      const page = await createConnectionRepo(watched).list(listed, { provider_config_keys: ['github'] }, { limit: 5, page: 4 });
      const reads = connectionReads(commands);
      expect(names(page)).toEqual(expected(members, (doc) => doc.provider_config_key === 'github').slice(20, 25));
      // The page's five are read whole, and every connection a page reads first, its listed fields only.
      expect(reads.filter((read) => read.whole).reduce((sum, read) => sum + read.ids, 0)).toBe(5);
      expect(reads.filter((read) => !read.whole).reduce((sum, read) => sum + read.ids, 0)).toBeGreaterThanOrEqual(25);
      // Read whole, the page's connections are as stored.
      expect(page.every((doc) => typeof doc.credentials === 'string' && doc.credentials.length > 0)).toBe(true);
    } finally {
      await close();
    }
  }, 30_000);
});

const searched = environmentId('env_search');
const brands = ['Acme', 'globex', 'Initech', 'umbrella.co'];
/** A connection of the search environment: `<brand>-user(<i>)*`, so that regex characters sit in every id. */
const findable = (i: number, connectionId = `${brands[i % 4]}-user(${i})*`) =>
  connectionFixture(
    { _id: `search_${i}`, id: 20_000 + i, provider_config_key: i % 2 === 0 ? 'github' : 'gitlab', connection_id: connectionId },
    { tags: { team: `t${i % 3}` }, end_user: { id: `u${i % 5}` }, created_at: new Date(Date.UTC(2026, 1, 1) + i * 1000) },
  );
const holds = (needle: string) => (doc: Omit<ConnectionDoc, 'environment_id'>) => doc.connection_id.toLowerCase().includes(needle.toLowerCase());

/**
 * `search` reads the lists of the needle's grams (three characters of the lowercased id): the
 * smallest of them, like the other filters' lists, with the whole filter checked on what it
 * lists. A needle shorter than a gram walks the environment's list with the filter.
 */
describe('search reads the gram lists', () => {
  const long = `${'long-tenant-'.repeat(6)}UUID-550e8400-e29b-41d4-a716-446655440000`;
  const findables = [...Array.from({ length: 48 }, (_, i) => findable(i)), findable(48, long), findable(49, 'ab'), findable(50, 'a😀Bc')];

  beforeAll(async () => {
    for (const doc of findables) await repo.insert(searched, doc);
  }, 60_000);

  it('finds a substring anywhere in the id, ignoring case, newest first, regex characters as text', async () => {
    for (const needle of ['ACME', 'me-US', 'user(1', '(3)*', 'co-user(4', 'ex-', ')*', 'UMBRELLA.CO-USER(47)*', 'a😀b', 'bc', 'e8400-E29B', 'tenant-long', '.', '*', 'a.c', 'nowhere']) {
      expect([needle, names(await repo.list(searched, { search: needle }, all))]).toEqual([needle, expected(findables, holds(needle))]);
    }
    // Another environment's connections are its own.
    expect(await repo.list(other, { search: 'acme' }, all)).toEqual([]);
  }, 60_000);

  it('pages newest first, and combines with integration, tags and end user', async () => {
    const pages = [0, 1, 2, 3].map((page) => repo.list(searched, { search: 'USER(' }, { limit: 5, page }));
    expect((await Promise.all(pages)).map(names)).toEqual([0, 1, 2, 3].map((page) => expected(findables, holds('user(')).slice(page * 5, page * 5 + 5)));
    expect(names(await repo.list(searched, { search: 'user(1', provider_config_keys: ['github'] }, all))).toEqual(
      expected(findables, (doc) => holds('user(1')(doc) && doc.provider_config_key === 'github'),
    );
    expect(names(await repo.list(searched, { search: 'init', tags: { team: 't1' }, end_user_id: 'u3' }, all))).toEqual(
      expected(findables, (doc) => holds('init')(doc) && doc.tags['team'] === 't1' && doc.end_user?.['id'] === 'u3'),
    );
    expect(names(await repo.list(searched, { search: '2', provider_config_keys: ['gitlab', 'github'], tags: { team: 't0' } }, { limit: 4, page: 1 }))).toEqual(
      expected(findables, (doc) => holds('2')(doc) && doc.tags['team'] === 't0').slice(4, 8),
    );
    expect(names(await repo.list(searched, { search: 'ca4', end_user_id: 'u1' }, all))).toEqual([]);
    // A connection id and a search must both match.
    expect(names(await repo.list(searched, { connection_id: 'ab', search: 'AB' }, all, ['github', 'gitlab']))).toEqual(['ab']);
    expect(names(await repo.list(searched, { connection_id: 'ab', search: 'abc' }, all, ['github', 'gitlab']))).toEqual([]);
  }, 60_000);

  it('a removed connection is not found', async () => {
    expect(names(await repo.list(searched, { search: 'user(5)' }, all))).toEqual(['globex-user(5)*']);
    expect(await repo.remove(searched, 'search_5')).toBe(true);
    expect(await repo.list(searched, { search: 'user(5)' }, all)).toEqual([]);
    expect(names(await repo.list(searched, { search: 'x-user(' }, all))).not.toContain('globex-user(5)*');
    expect(names(await repo.list(searched, { search: '5' }, all))).not.toContain('globex-user(5)*');
  }, 30_000);

  it("a gram's list and the long ids' list: _id lookups, as is the backfill's mark", async () => {
    const heads = connectionListHeadModel(connection).collection as unknown as driver.Collection<ConnectionListHeadDoc>;
    const entries = connectionListEntryModel(connection).collection as unknown as driver.Collection<ConnectionListEntryDoc>;
    for (const list of [['gram', 'use'], ['long_id']] as ConnectionList[]) {
      const head = await explainUntilIndexed(() => heads.find(connectionListQueries.head(searched, list)));
      expect(head.indexed ? 'indexed' : `${list.join(' ')}: ${head.summary}`).toBe('indexed');
      const entry = await explainUntilIndexed(() => entries.find(connectionListQueries.entry(searched, list, 1)));
      expect(entry.indexed ? 'indexed' : `${list.join(' ')}: ${entry.summary}`).toBe('indexed');
    }
    const mark = await explainUntilIndexed(() => heads.find(connectionListQueries.gramsComplete()));
    expect(mark.indexed ? 'indexed' : `grams complete: ${mark.summary}`).toBe('indexed');
  }, 60_000);

  it('connections stored before the gram lists: found by walking every connection until the backfill, by their grams after', async () => {
    const older = environmentId('env_search_older');
    const docs = connectionModel(connection).collection as unknown as driver.Collection<ConnectionDoc>;
    const heads = connectionListHeadModel(connection).collection as unknown as driver.Collection<ConnectionListHeadDoc>;
    // Stored by a vault of lists but no grams: listed, not searchable; the backfill not done.
    await heads.deleteOne(connectionListQueries.gramsComplete());
    const before = Array.from({ length: 12 }, (_, i) => ({ ...findable(600 + i), environment_id: older }));
    await docs.insertMany(before);
    expect(await repo.indexLists()).toBe(12);
    const restarted = createConnectionRepo(connection);
    expect(names(await restarted.list(older, { search: 'user(60' }, all))).toEqual(expected(before, holds('user(60')));
    // Two replicas backfill at once: each connection found once, and marked.
    const [first, second] = await Promise.all([restarted.indexGrams(), createConnectionRepo(connection).indexGrams()]);
    expect(first + second).toBeGreaterThanOrEqual(12);
    expect(await restarted.indexGrams()).toBe(0);
    expect(await docs.countDocuments({ environment_id: older, searchable: true })).toBe(12);
    for (const needle of ['user(60', 'GLOBEX', 'r(611)']) {
      expect(names(await restarted.list(older, { search: needle }, all))).toEqual(expected(before, holds(needle)));
    }
    expect(names(await restarted.list(older, { search: 'user(' }, { limit: 5, page: 1 }))).toEqual(expected(before, holds('user(')).slice(5, 10));
  }, 60_000);

  it('a backfill stops when asked, and the next one carries on', async () => {
    const stopped = environmentId('env_search_stopped');
    const docs = connectionModel(connection).collection as unknown as driver.Collection<ConnectionDoc>;
    const heads = connectionListHeadModel(connection).collection as unknown as driver.Collection<ConnectionListHeadDoc>;
    await heads.deleteOne(connectionListQueries.gramsComplete());
    await docs.insertMany(Array.from({ length: 5 }, (_, i) => ({ ...findable(700 + i), environment_id: stopped })));
    await repo.indexLists();
    const stop = new AbortController();
    stop.abort();
    expect(await repo.indexGrams({ signal: stop.signal })).toBe(0);
    expect(await heads.findOne(connectionListQueries.gramsComplete())).toBeNull();
    expect(await repo.indexGrams()).toBe(5);
    expect(names(await createConnectionRepo(connection).list(stopped, { search: 'R(70' }, all))).toHaveLength(5);
  }, 60_000);
});

describe('list numbers', () => {
  it('leave no gap when a replica writes to a list it has not written to before', async () => {
    const gapless = environmentId('env_gapless');
    const entries = connectionListEntryModel(connection).collection as unknown as driver.Collection<ConnectionListEntryDoc>;
    // Each write from a fresh replica: none remembers where the list ends, all read it.
    for (let i = 0; i < 3; i += 1) await createConnectionRepo(connection).insert(gapless, doc(9000 + i, `gapless-${i}`));
    const numbers = [1, 2, 3, 4].map((n) => connectionListQueries.entry(gapless, ['all'], n)._id);
    const found = await Promise.all(numbers.map((_id) => entries.findOne({ _id })));
    expect(found.map((entry) => entry?.n ?? null)).toEqual(['gapless-0', 'gapless-1', 'gapless-2', null]);
  }, 30_000);
});
