import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, watchCommands, type TestMongo, type WatchedConnection } from '@latchkey/testing';
import type { RecordAction } from '@latchkey/contracts';
import { LOG_BLOCK, logBlockKey, recordLogGapsModel, recordLogModel, recordSequenceModel, type RecordLogBlockDoc, type RecordLogGapsDoc } from './record-model.js';
import { externalIdsOf, idRange, readAllPages, recordWrite, saveBatch } from './record-pages-fixture.js';
import { createRecordRepo, recordQueries, type RecordRepo, type RecordScope } from './record-repo.js';

/**
 * A scope whose records have all been written again since they were added (an incremental CRM
 * sync over weeks) holds, before its first record, a run of blocks those records left; one
 * where a few records never changed holds such runs between them. A page read every one of
 * those blocks: about 2,000 lookups for a first page at a million records. These tests count
 * the change log documents a read fetches (the commands it sends), without timing anything.
 */

let mongo: TestMongo;
let dbName: string;
let connection: Connection;
let repo: RecordRepo;
/** A second connection, reporting its commands, and a repository reading through it. */
let watched: WatchedConnection;
let watchedRepo: RecordRepo;

const base: RecordScope = { environment: environmentId('env_emptied'), connection: 3, model: 'Contact', variant: 'base' };
const scopeNamed = (model: string): RecordScope => ({ ...base, model });
const write = recordWrite;
const ids = externalIdsOf;
const range = idRange;
const blockOf = (seq: number) => Math.floor(seq / LOG_BLOCK);
const logBlocks = () => recordLogModel(connection).collection as unknown as driver.Collection<RecordLogBlockDoc>;
const gapLists = () => recordLogGapsModel(connection).collection as unknown as driver.Collection<RecordLogGapsDoc>;
const heads = () => recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number; start?: number }>;

/** A batch as the records handler writes it, by this repository or another. */
const save = (target: RecordScope, externalIds: readonly string[], action: RecordAction = 'UPDATED', at = new Date(), writer = repo) => saveBatch(writer, target, externalIds, action, at);

/** Every page from a cursor on, as a client reads them. */
const readAll = (target: RecordScope, limit: number, query: Parameters<typeof readAllPages>[3] = {}, afterSeq?: number) => readAllPages(repo, target, limit, query, afterSeq);

/**
 * What one read through the watched repository fetches of the change log: the numbers of the
 * blocks it looked up (`blocks`), and how many documents of the log's collections it asked for
 * in all (`reads`: the blocks, and any other document the log keeps beside them).
 */
async function logReads<T>(read: (reader: RecordRepo) => Promise<T>): Promise<{ result: T; blocks: number[]; reads: number }> {
  watched.commands.length = 0;
  const result = await read(watchedRepo);
  const finds = watched.commands.filter((command) => command.name === 'find' && String(command.body['find']).startsWith('record_log'));
  const blocks = finds
    .filter((command) => command.body['find'] === 'record_log')
    .map((command) => Number(String((command.body['filter'] as { _id: string })._id).split(':').at(-1)));
  return { result, blocks, reads: finds.length };
}

/**
 * A scope with `emptied` blocks that its records left, as `emptied` × 500 records all written
 * again leave them, at a fraction of the writes: `kept + emptied` records, one at the start of
 * each block, numbers reserved as a sync reserves them; then all but the first `kept` written
 * again. Returns the records' ids.
 */
async function emptiedRun(target: RecordScope, emptied: number, kept = 0, at = new Date()): Promise<string[]> {
  const all = range(0, kept + emptied, 's');
  const first = await repo.reserve(target, all.length * LOG_BLOCK);
  await repo.insertNew(target, all.map((id, i) => write(id, first + i * LOG_BLOCK, 'ADDED', at)));
  await save(target, all.slice(kept), 'UPDATED', new Date(at.getTime() + 1000));
  return all;
}

beforeAll(async () => {
  mongo = await startMongo();
  dbName = uniqueDbName('records_emptied');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createRecordRepo(connection);
  await repo.init();
  watched = await watchCommands(mongo.uri, dbName);
  watchedRepo = createRecordRepo(watched.connection);
}, 120_000);

afterAll(async () => {
  await watched?.close();
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('blocks of the change log that later writes emptied', () => {
  it('a gap list is read by `_id`, an index lookup on every backend', async () => {
    // Other scopes' lists, so that PostgreSQL's planner, which reads a table of a few rows
    // whole, has a table worth an index.
    await gapLists().insertMany(
      Array.from({ length: 3000 }, (_, i) => {
        const other = scopeNamed(`Other${i}`);
        return { ...recordQueries.logGaps(other, 0), environment_id: other.environment, connection: other.connection, model: other.model, variant: other.variant, b: [1, 2] };
      }),
    );
    const verdict = await explainUntilIndexed(() => gapLists().find(recordQueries.logGaps(scopeNamed('Other7'), 0)));
    expect(verdict.indexed ? 'indexed' : verdict.summary).toBe('indexed');
  }, 30_000);

  it('a first page of a scope whose 1,500 records were all written again reads none of the blocks they left, and those blocks are gone', async () => {
    const target = scopeNamed('Rewritten');
    await save(target, range(0, 1500));
    await save(target, range(0, 1500), 'UPDATED');
    // Added at 1 to 1,500 (blocks 0 to 3), written again at 1,501 to 3,000: blocks 0 to 2 hold nothing.
    const { result: page, blocks, reads } = await logReads((reader) => reader.page(target, { limit: 101 }));
    expect(ids(page)).toEqual(range(0, 101));
    const firstBlock = blockOf(page[0]!.seq);
    expect(firstBlock).toBe(3);
    expect(blocks.filter((block) => block < firstBlock)).toEqual([]);
    // One batch of blocks (four at once) holds the page.
    expect(reads).toBeLessThanOrEqual(4);
    // An old cursor, from before the records were written again, reads on past them too.
    const { result: onward, blocks: onwardBlocks } = await logReads((reader) => reader.page(target, { afterSeq: 1200, limit: 10 }));
    expect(ids(onward)).toEqual(range(0, 10));
    expect(onwardBlocks.filter((block) => block < firstBlock)).toEqual([]);
    // The emptied blocks are gone from the log; the ones holding records stay.
    const left = await logBlocks().find({ model: target.model }).toArray();
    expect(left.map((block) => Number(block._id.split(':').at(-1))).sort((a, b) => a - b)).toEqual([3, 4, 5, 6]);
    expect(ids(await readAll(target, 700))).toEqual(range(0, 1500));
  }, 120_000);

  it.each([40, 200])('a first page reads one batch of blocks, with %i emptied blocks before its first record', async (emptied) => {
    const target = scopeNamed(`Leading${emptied}`);
    const all = await emptiedRun(target, emptied);
    const { result: page, blocks, reads } = await logReads((reader) => reader.page(target, { limit: 11 }));
    expect(ids(page)).toEqual(all.slice(0, 11));
    expect(blocks.filter((block) => block < blockOf(page[0]!.seq))).toEqual([]);
    expect(reads).toBeLessThanOrEqual(4);
    // Pages of added records (none left) and of every action alike, and prune.
    const added = await logReads((reader) => reader.page(target, { actions: ['ADDED'], limit: 10 }));
    expect(added.result).toEqual([]);
    expect(added.blocks.filter((block) => block < blockOf(page[0]!.seq))).toEqual([]);
    expect(ids(await readAll(target, 300))).toEqual(all);
    const last = (await repo.findByIds(target, [all.at(-1)!]))[0]!;
    const pruned = await logReads((reader) => reader.prune(target, last.seq, 10, new Date()));
    expect(pruned.result).toEqual({ count: 10, hasMore: true });
    expect(pruned.blocks.filter((block) => block < blockOf(page[0]!.seq))).toEqual([]);
  }, 120_000);

  it.each([40, 200])('a page passes %i emptied blocks between two records at a bounded cost', async (emptied) => {
    // One record never written again holds the scope's first block; the others left theirs.
    const target = scopeNamed(`Middle${emptied}`);
    const at = new Date('2026-03-01T00:00:00.000Z');
    const all = await emptiedRun(target, emptied, 1, at);
    // Where the code before read every emptied block (40, or 200), a few batches of lookups.
    const first = await logReads((reader) => reader.page(target, { limit: 3 }));
    expect(ids(first.result)).toEqual(all.slice(0, 3));
    expect(first.reads).toBeLessThanOrEqual(12);
    const onward = await logReads((reader) => reader.page(target, { afterSeq: first.result[0]!.seq, limit: 3 }));
    expect(ids(onward.result)).toEqual(all.slice(1, 4));
    expect(onward.reads).toBeLessThanOrEqual(12);
    const added = await logReads((reader) => reader.page(target, { actions: ['ADDED'], limit: 10 }));
    expect(ids(added.result)).toEqual([all[0]]);
    expect(added.reads).toBeLessThanOrEqual(12);
    const since = await logReads((reader) => reader.page(target, { modifiedAfter: at, limit: 3 }));
    expect(ids(since.result)).toEqual(all.slice(1, 4));
    expect(since.reads).toBeLessThanOrEqual(12);
    // And every record, once, in change order, however it is read.
    expect(ids(await readAll(target, 250))).toEqual(all);
    expect(ids(await readAll(target, 250, { modifiedAfter: at }))).toEqual(all.slice(1));
    expect(ids(await readAll(target, 250, { actions: ['UPDATED'] }))).toEqual(all.slice(1));
    const last = (await repo.findByIds(target, [all.at(-1)!]))[0]!;
    expect(await repo.prune(target, last.seq, 100_000, new Date())).toEqual({ count: all.length, hasMore: false });
    expect(await repo.count(target)).toBe(all.length);
  }, 120_000);

  it('reads a scope whose emptied blocks the code before left in place, and starts past them once a write empties the blocks before them', async () => {
    // Two records never written again hold blocks 0 and 1; blocks 2 to 31 emptied.
    const target = scopeNamed('LeftBefore');
    const at = new Date('2026-03-02T00:00:00.000Z');
    const all = await emptiedRun(target, 30, 2, at);
    // As the code before left them: every emptied block still stored, with no entry, and a head
    // that knows of none of them.
    const fields = { environment_id: target.environment, connection: target.connection, model: target.model, variant: target.variant };
    for (let block = 2; block < 32; block++) {
      await logBlocks().updateOne({ _id: logBlockKey(target.environment, target.connection, target.model, target.variant, block) }, { $set: { ...fields, t1: at, e: {} } }, { upsert: true });
    }
    await heads().updateOne(recordQueries.sequence(target), { $unset: { start: '' } });
    await gapLists().deleteMany({ model: target.model });
    expect(ids(await readAll(target, 7))).toEqual(all);
    expect(ids(await readAll(target, 7, { modifiedAfter: at }))).toEqual(all.slice(2));
    // The two records written again: blocks 0 and 1 empty, and pages start past every block
    // before the first that holds a record, those the code before emptied too.
    await save(target, all.slice(0, 2));
    const moved = [...all.slice(2), ...all.slice(0, 2)];
    const { result: page, blocks } = await logReads((reader) => reader.page(target, { limit: 5 }));
    expect(ids(page)).toEqual(moved.slice(0, 5));
    expect(blockOf(page[0]!.seq)).toBe(32);
    expect(blocks.filter((block) => block < 32)).toEqual([]);
    expect(ids(await readAll(target, 7))).toEqual(moved);
  }, 120_000);

  it('keeps a block whose numbers a write hands out again: records stored meanwhile, written under the numbers they were given', async () => {
    // `insertNew` meeting records another writer stored: their entries leave the log, and go
    // back in, under the same numbers, as they are written as upserts.
    const target = scopeNamed('StoredMeanwhile');
    const first = await repo.reserve(target, 7 * LOG_BLOCK);
    const stored = range(0, 10, 'x');
    await repo.insertNew(target, stored.map((id, i) => write(id, first + i)));
    // Blocks 1 to 4 hold nothing (a page meets them missing); block 5 only the records stored.
    await repo.insertNew(target, [...stored.map((id, i) => write(id, 5 * LOG_BLOCK + i)), write('y0', 6 * LOG_BLOCK)]);
    expect(ids(await readAll(target, 100))).toEqual([...stored, 'y0']);
  }, 60_000);

  it('a write that empties blocks sends nothing but `_id` lookups, updates and deletes', async () => {
    const target = scopeNamed('WatchedWrite');
    const all = await emptiedRun(target, 3, 2);
    watched.commands.length = 0;
    // Empties blocks 0 and 1, and moves the start past blocks 2 to 4 (emptied before).
    await save(target, all.slice(0, 2), 'UPDATED', new Date(), watchedRepo);
    const names = watched.commands.map((command) => command.name);
    expect(names).toEqual(expect.arrayContaining(['findAndModify', 'delete']));
    expect(names.filter((name) => ['aggregate', 'count', 'distinct', 'getMore'].includes(name))).toEqual([]);
    const filters = watched.commands.flatMap((command): unknown[] => {
      switch (command.name) {
        case 'find':
          return [command.body['filter']];
        case 'findAndModify':
          return [command.body['query']];
        case 'update':
          return (command.body['updates'] as Array<{ q: unknown }>).map((update) => update.q);
        case 'delete':
          return (command.body['deletes'] as Array<{ q: unknown }>).map((deletion) => deletion.q);
        default:
          return [];
      }
    });
    for (const filter of filters as Array<Record<string, unknown>>) {
      expect(Object.keys(filter)).toEqual(['_id']);
      // MongoDB answers a batch of records with one `$in` on `_id` (an index lookup there).
      if (watched.ferretDb || typeof filter['_id'] !== 'object') expect(typeof filter['_id']).toBe('string');
    }
    expect(ids(await readAll(target, 3))).toEqual([...all.slice(2), ...all.slice(0, 2)]);
    expect((await heads().findOne(recordQueries.sequence(target)))?.start).toBe(5);
  }, 60_000);
});
