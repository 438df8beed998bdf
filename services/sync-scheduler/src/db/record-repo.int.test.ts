import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, watchCommands, type TestMongo } from '@latchkey/testing';
import type { RecordAction } from '@latchkey/contracts';
import { LOG_BLOCK, recordKey, recordLogModel, recordModel, recordSequenceModel, type RecordDoc } from './record-model.js';
import { externalIdsOf, idRange, readAllPages, recordWrite, saveBatch } from './record-pages-fixture.js';
import { createRecordRepo, pageContinues, recordQueries, type RecordRepo, type RecordScope } from './record-repo.js';

let mongo: TestMongo;
let dbName: string;
let connection: Connection;
let repo: RecordRepo;

const scope: RecordScope = { environment: environmentId('env_a'), connection: 7, model: 'Contact', variant: 'base' };
const write = recordWrite;
const ids = externalIdsOf;
const range = idRange;
const save = (target: RecordScope, externalIds: readonly string[], action: RecordAction = 'UPDATED', at = new Date(), padding = 0) => saveBatch(repo, target, externalIds, action, at, padding);

/**
 * A save as the records handler first tries it in a scope that met no stored record last time:
 * every record inserted at once; those already stored are looked up, and, their content being the
 * same, not written again (a re-sync of unchanged records), only revealed when the batch writes
 * nothing. Returns the ids the insert stored.
 */
async function insertFirst(target: RecordScope, externalIds: readonly string[]): Promise<string[]> {
  const first = await repo.reserve(target, externalIds.length);
  const skipped = new Set(
    await repo.insertAbsent(
      target,
      externalIds.map((id, offset) => write(id, first + offset)),
    ),
  );
  const rest = externalIds.filter((_, index) => skipped.has(index));
  const found = await repo.findByIds(target, rest);
  const stored = new Set(ids(found));
  const absent = rest.filter((id) => !stored.has(id));
  if (absent.length > 0) await save(target, absent);
  else if (found.length > 0) await repo.reveal(target, Math.max(...found.map((doc) => doc.seq)));
  return externalIds.filter((_, index) => !skipped.has(index));
}

/** Every page from a cursor on, as a client reads them. */
const readAll = (target: RecordScope, limit: number, query: Parameters<typeof readAllPages>[3] = {}, afterSeq?: number) => readAllPages(repo, target, limit, query, afterSeq);

beforeAll(async () => {
  mongo = await startMongo();
  dbName = uniqueDbName('records');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createRecordRepo(connection);
  await repo.init();
  // Enough rows that a scan and a lookup differ in the plan, and another scope beside them.
  await repo.insertNew(scope, Array.from({ length: 500 }, (_, i) => write(`r${i}`, i + 1)));
  await repo.insertNew({ ...scope, connection: 8 }, Array.from({ length: 100 }, (_, i) => write(`r${i}`, i + 1)));
  await repo.reserve(scope, 500);
  // Other scopes' heads and log blocks, so that PostgreSQL's planner, which reads a table of a
  // few rows whole, has a table worth an index.
  await (recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number; log: number }>).insertMany(
    Array.from({ length: 3000 }, (_, i) => ({ ...recordQueries.sequence({ ...scope, model: `Other${i}` }), seq: 1, log: 1 })),
  );
  await repo.insertNew({ ...scope, model: 'Spread' }, Array.from({ length: 200 }, (_, i) => write(`s${i}`, i * LOG_BLOCK + 1)));
}, 120_000);

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

/**
 * The hot queries, explained on the test database (MongoDB, or FerretDB on SQLite or
 * PostgreSQL): each must be an index lookup, so a re-sync or a page costs the same whatever the
 * scope and the collection hold. A regression to a scan fails here without timing anything.
 */
describe('record lookups are index lookups', () => {
  it('a record by scope and id (the re-sync lookup, the upsert filter, and each record of a page)', async () => {
    const records = recordModel(connection).collection as unknown as driver.Collection<RecordDoc>;
    const verdict = await explainUntilIndexed(() => records.find(recordQueries.byId(scope, 'r250')));
    expect(verdict.indexed ? 'indexed' : verdict.summary).toBe('indexed');
    const found = await repo.findByIds(scope, ['r250', 'r3', 'missing']);
    expect(found.map((doc) => doc.external_id).sort()).toEqual(['r250', 'r3']);
    // The other scope's record of the same id is not this one.
    expect(found.every((doc) => doc.connection === scope.connection)).toBe(true);
  }, 20_000);

  it("a scope's sequence counter and change log head (reserving numbers, and every read's first lookup)", async () => {
    const sequences = recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number }>;
    const verdict = await explainUntilIndexed(() => sequences.find(recordQueries.sequence(scope)));
    expect(verdict.indexed ? 'indexed' : verdict.summary).toBe('indexed');
  }, 20_000);

  it('a block of the change log (pages, modified_after, filters and prune)', async () => {
    const blocks = recordLogModel(connection).collection as unknown as driver.Collection<{ _id: string }>;
    const verdict = await explainUntilIndexed(() => blocks.find(recordQueries.logBlock(scope, 0)));
    expect(verdict.indexed ? 'indexed' : verdict.summary).toBe('indexed');
  }, 20_000);

  it('pages, modified_after, filters and prune send no query but those `_id` lookups', async () => {
    const { connection: watched, commands, ferretDb, close } = await watchCommands(mongo.uri, dbName);
    try {
      const watchedRepo = createRecordRepo(watched);
      const target = { ...scope, model: 'Watched' };
      const at = new Date();
      await watchedRepo.insertNew(target, Array.from({ length: 300 }, (_, i) => write(`w${i}`, i + 1, 'ADDED', at)));
      await watchedRepo.page(target, { limit: 1 });
      commands.length = 0;
      expect(await watchedRepo.page(target, { limit: 50 })).toHaveLength(50);
      expect(await watchedRepo.page(target, { afterSeq: 250, limit: 100 })).toHaveLength(50);
      expect(await watchedRepo.page(target, { modifiedAfter: new Date(at.getTime() - 1), limit: 10 })).toHaveLength(10);
      expect(await watchedRepo.page(target, { actions: ['UPDATED'], limit: 10 })).toHaveLength(0);
      expect(await watchedRepo.prune(target, 100, 50, new Date())).toEqual({ count: 50, hasMore: true });
      const finds = commands.filter((command) => command.name === 'find');
      expect(finds.length).toBeGreaterThan(0);
      const updates = commands
        .filter((command) => command.name === 'update')
        .flatMap((command) => command.body['updates'] as Array<{ q: Record<string, unknown> }>)
        .map((update) => ({ body: { filter: update.q } as Record<string, unknown> }));
      for (const { body } of [...finds, ...updates]) {
        const filter = body['filter'] as Record<string, unknown>;
        expect(Object.keys(filter)).toEqual(['_id']);
        // MongoDB answers a page's records with one `$in` on `_id` (an index lookup there).
        if (ferretDb || typeof filter['_id'] !== 'object') expect(typeof filter['_id']).toBe('string');
        else expect(Object.keys(filter['_id'] as object)).toEqual(['$in']);
        // No sort or skip for the server to do after reading everything.
        expect(body['sort']).toBeUndefined();
        expect(body['skip']).toBeUndefined();
      }
      // Nothing that reads many documents: no aggregation, count, bulk delete or further batches.
      expect(commands.map((command) => command.name).filter((name) => ['aggregate', 'count', 'delete', 'getMore', 'distinct'].includes(name))).toEqual([]);
    } finally {
      await close();
    }
  }, 30_000);
});

describe('the change log', () => {
  const fresh = (model: string): RecordScope => ({ ...scope, model });

  it('pages in change order, from a cursor, with no gap and no repeat', async () => {
    const all = await readAll(scope, 37);
    expect(ids(all)).toEqual(range(0, 500));
    const deep = await readAll(scope, 100, {}, 450);
    expect(ids(deep)).toEqual(range(450, 500));
    // The other scope's records are not this one's.
    expect(ids(await readAll({ ...scope, connection: 8 }, 1000))).toEqual(range(0, 100));
  }, 30_000);

  // A page gathered up to `limit` (10,000) records whatever their size: with large records one
  // GET /records held hundreds of megabytes in the scheduler, or passed the bus's reply limit and
  // could never be read.
  it('stops a page once its payloads reach the byte budget (one record at least), and the cursor goes on from there', async () => {
    const target = fresh('Sized');
    await save(target, range(0, 30), 'UPDATED', new Date(), 1_000);
    const first = await repo.page(target, { limit: 101, maxBytes: 5_000 });
    expect(ids(first)).toEqual(range(0, 5));
    expect(pageContinues(first, 100, 5_000)).toBe(true);
    expect(ids(await readAll(target, 100, { maxBytes: 5_000 }))).toEqual(range(0, 30));
    expect(ids(await readAll(target, 7, { maxBytes: 100 }))).toEqual(range(0, 30));
    // By id too: the records named, in change order, within the budget.
    const named = ['r29', 'r3', 'r17', 'r8', 'r21', 'r11', 'r2'];
    expect(ids(await repo.page(target, { ids: named, limit: 101, maxBytes: 3_000 }))).toEqual(['r2', 'r3', 'r8']);
    expect(ids(await readAll(target, 100, { ids: named, maxBytes: 3_000 }))).toEqual(['r2', 'r3', 'r8', 'r11', 'r17', 'r21', 'r29']);
  }, 30_000);

  it('moves a record written again to the end, once', async () => {
    const target = fresh('Again');
    await save(target, range(0, 1200));
    await save(target, ['r5', 'r700', 'r1199']);
    await save(target, ['r5']);
    const all = await readAll(target, 250);
    expect(ids(all)).toEqual([...range(0, 1200).filter((id) => !['r5', 'r700', 'r1199'].includes(id)), 'r700', 'r1199', 'r5']);
    expect(all.map((doc) => doc.seq)).toEqual([...all.map((doc) => doc.seq)].sort((a, b) => a - b));
    // The old entries left the log: the blocks hold one entry per record.
    const blocks = await (recordLogModel(connection).collection as unknown as driver.Collection<{ e: object }>).find({ model: 'Again' }).toArray();
    expect(blocks.reduce((sum, block) => sum + Object.keys(block.e).length, 0)).toBe(1200);
  }, 60_000);

  it('gives a record named twice by ids once', async () => {
    const target = fresh('NamedTwice');
    await save(target, range(0, 3));
    expect(ids(await repo.page(target, { ids: ['r1', 'r1', 'r2', 'r1'], limit: 10 }))).toEqual(['r1', 'r2']);
  });

  // A page by ids chose its records by their fields, cut them to size, then read them whole and
  // dropped one written again in between: the page came out one short, with no next cursor,
  // though a record it had named and passed over was still there to read.
  it('pages by ids past a record written again while the page is read, and leaves none named unread', async () => {
    const target = fresh('RewrittenWhileRead');
    await save(target, range(0, 4));
    // r1 is written again once the page has chosen its records, before it reads them whole.
    const racing: RecordRepo = {
      ...repo,
      findByIds: async (...args: Parameters<RecordRepo['findByIds']>) => {
        const chosen = await repo.findByIds(...args);
        await save(target, ['r1']);
        return chosen;
      },
    };
    const first = await racing.page(target, { ids: range(0, 4), limit: 3 });
    expect(ids(first)).toEqual(['r0', 'r2', 'r3']);
    expect(pageContinues(first, 2)).toBe(true);
    // From the page's cursor on: r1 in its new state.
    expect(ids(await readAll(target, 2, { ids: range(0, 4) }, first[1]!.seq))).toEqual(['r3', 'r1']);
  });

  it("reads every record a re-sync's first insert stored, when it met records already stored", async () => {
    // A run killed after its first page, and run again: its one batch of 995 starts with the
    // 100 records the first run stored. (FerretDB 1.24 inserts in batches of 100, and an
    // ordered insert went on past the duplicate into the next batch.)
    const target = fresh('Rerun');
    expect(await insertFirst(target, range(0, 100))).toEqual(range(0, 100));
    expect(await insertFirst(target, range(0, 995))).toEqual(range(100, 995));
    const all = await readAll(target, 1000);
    expect(ids(all).sort()).toEqual(range(0, 995).sort());
    expect(await repo.count(target)).toBe(995);
    // Also with the first stored record further in, and several batches of stored ones.
    const later = fresh('RerunLater');
    await insertFirst(later, [...range(150, 151), ...range(300, 520)]);
    expect(await insertFirst(later, range(0, 995))).toHaveLength(995 - 221);
    expect(ids(await readAll(later, 1000)).sort()).toEqual(range(0, 995).sort());
  }, 60_000);

  it('reads the records a writer stored before it stopped, once a retry finds them stored', async () => {
    // The writer stopped after storing its records and before raising `visible` (its process
    // killed, or the database gone): they are stored and logged, not yet readable. The retry
    // finds them stored and unchanged, and writes nothing.
    const target = fresh('Stopped');
    await insertFirst(target, range(0, 100));
    const publish = jest.spyOn(recordSequenceModel(connection).collection, 'updateOne').mockRejectedValueOnce(new Error('writer stopped'));
    await expect(insertFirst(target, range(100, 200))).rejects.toThrow('writer stopped');
    publish.mockRestore();
    // Stored, not yet readable (nor counted), by id either: its cursor would pass numbers not yet read.
    expect(await repo.count(target)).toBe(100);
    expect(ids(await repo.page(target, { ids: ['r50', 'r150'], limit: 10 }))).toEqual(['r50']);
    await insertFirst(target, range(100, 200));
    expect(await repo.count(target)).toBe(200);
    expect(ids(await readAll(target, 1000))).toEqual(range(0, 200));
  }, 60_000);

  it('pages without a gap or a repeat while a writer rewrites records', async () => {
    const target = fresh('Concurrent');
    await save(target, range(0, 400));
    let writing = true;
    const writer = (async () => {
      for (let round = 0; round < 8; round++) await save(target, range(round * 50, round * 50 + 60).concat(range(400 + round * 10, 410 + round * 10)));
      writing = false;
    })();
    const seen: RecordDoc[] = [];
    let cursor: number | undefined;
    for (let quiet = 0; quiet < 2; ) {
      const docs = await repo.page(target, { ...(cursor === undefined ? {} : { afterSeq: cursor }), limit: 24 });
      seen.push(...docs);
      if (docs.length > 0) cursor = docs.at(-1)!.seq;
      if (!writing && docs.length === 0) quiet++;
    }
    await writer;
    // Strictly increasing: never one number twice, never backwards.
    const seqs = seen.map((doc) => doc.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!);
    // Every record, in its last state, and a record twice only in two different states.
    const last = new Map(seen.map((doc) => [doc.external_id, doc]));
    const stored = await repo.findByIds(target, range(0, 480));
    expect(last.size).toBe(480);
    for (const doc of stored) expect(last.get(doc.external_id)!.seq).toBe(doc.seq);
  }, 120_000);

  it('reads modified_after strictly after the time, from the first block that holds it', async () => {
    const target = fresh('Times');
    const t1 = new Date('2026-01-01T00:00:00.000Z');
    const t2 = new Date('2026-01-02T00:00:00.000Z');
    const t3 = new Date('2026-01-03T00:00:00.000Z');
    await save(target, range(0, 1100), 'UPDATED', t1);
    await save(target, range(1100, 1200), 'UPDATED', t2);
    await save(target, ['r3', 'r1150'], 'UPDATED', t3);
    expect(ids(await readAll(target, 500, { modifiedAfter: t2 }))).toEqual(['r3', 'r1150']);
    expect(ids(await readAll(target, 500, { modifiedAfter: new Date(t2.getTime() - 1) }))).toEqual([...range(1100, 1200).filter((id) => id !== 'r1150'), 'r3', 'r1150']);
    expect(await readAll(target, 500, { modifiedAfter: t3 })).toEqual([]);
    expect(await readAll(target, 5000, { modifiedAfter: new Date(t1.getTime() - 1) })).toHaveLength(1200);
  }, 60_000);

  it('filters by last action, each record at its newest change only', async () => {
    const target = fresh('Actions');
    await save(target, range(0, 1500));
    await save(target, ['r10', 'r20', 'r1400'], 'UPDATED');
    await save(target, ['r30', 'r20'], 'DELETED');
    await save(target, ['r10'], 'UPDATED');
    expect(ids(await readAll(target, 2, { actions: ['UPDATED'] }))).toEqual(['r1400', 'r10']);
    const deleted = await readAll(target, 2, { actions: ['DELETED'] });
    expect(ids(deleted)).toEqual(['r30', 'r20']);
    expect(deleted.every((doc) => doc.last_action === 'DELETED' && doc.deleted_at !== null)).toBe(true);
    expect(await readAll(target, 1000, { actions: ['ADDED'] })).toHaveLength(1496);
    expect(ids(await readAll(target, 3, { actions: ['UPDATED', 'DELETED'] }))).toEqual(['r1400', 'r30', 'r20', 'r10']);
    // By ids: the same filters.
    expect(ids(await repo.page(target, { ids: ['r10', 'r20', 'r40'], actions: ['UPDATED', 'ADDED'], limit: 10 }))).toEqual(['r40', 'r10']);
  }, 60_000);

  it('prunes in change order up to a cursor, and reads only above what it pruned before', async () => {
    const target = fresh('Prune');
    await save(target, range(0, 1300));
    const cut = (await repo.findByIds(target, ['r1099']))[0]!.seq;
    await save(target, ['r5'], 'UPDATED');
    expect(await repo.prune(target, cut, 600, new Date())).toEqual({ count: 600, hasMore: true });
    expect(await repo.prune(target, cut, 600, new Date())).toEqual({ count: 499, hasMore: false });
    expect(await repo.prune(target, cut, 600, new Date())).toEqual({ count: 0, hasMore: false });
    const all = await readAll(target, 2000);
    const pruned = all.filter((doc) => doc.payload === null).map((doc) => doc.external_id);
    expect(pruned).toEqual(range(0, 1100).filter((id) => id !== 'r5'));
    expect(all.filter((doc) => doc.payload === null).every((doc) => doc.pruned_at !== null)).toBe(true);
    // A record written after the cursor keeps its payload; one written after it past the cut is pruned by a later cut.
    const later = (await repo.findByIds(target, ['r5']))[0]!;
    expect(later.payload).not.toBeNull();
    expect(await repo.prune(target, later.seq, 1000, new Date())).toEqual({ count: 201, hasMore: false });
  }, 60_000);

  it('clears a scope: its records and log go, and later writes read from the start', async () => {
    const target = fresh('Cleared');
    await save(target, range(0, 700));
    await repo.clear(target);
    expect(await readAll(target, 100)).toEqual([]);
    await save(target, range(0, 3));
    expect(ids(await readAll(target, 100))).toEqual(range(0, 3));
  }, 60_000);

  it('back-fills the log at start for records stored before it', async () => {
    // Stored as the repository wrote them before the change log: records and a counter only.
    const target = fresh('Old');
    const key = recordQueries.sequence(target)._id;
    const rawRecords = recordModel(connection).collection as unknown as driver.Collection<RecordDoc>;
    const at = new Date('2026-02-01T00:00:00.000Z');
    await rawRecords.insertMany(
      range(0, 1200).map((id, i): RecordDoc => {
        // Some written again since: their numbers are not in id order.
        const seq = i % 100 === 0 ? 2000 + i : i + 1;
        return {
          _id: recordKey(target.environment, target.connection, target.model, target.variant, id),
          environment_id: target.environment,
          connection: target.connection,
          model: target.model,
          variant: target.variant,
          ...write(id, seq, i % 100 === 0 ? 'UPDATED' : 'ADDED', i % 100 === 0 ? new Date(at.getTime() + 1000) : at),
        };
      }),
    );
    await (recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number }>).insertOne({ _id: key, seq: 3200 });
    expect(await readAll(target, 100)).toEqual([]);

    await createRecordRepo(connection).init();
    const all = await readAll(target, 333);
    const moved = range(0, 1200).filter((_, i) => i % 100 === 0);
    expect(ids(all)).toEqual([...range(0, 1200).filter((id) => !moved.includes(id)), ...moved]);
    expect(ids(await readAll(target, 5, { actions: ['UPDATED'] }))).toEqual(moved);
    expect(ids(await readAll(target, 5, { modifiedAfter: at }))).toEqual(moved);
    // New writes go on from the counter.
    await save(target, ['r1'], 'UPDATED');
    expect(ids(await readAll(target, 5, { actions: ['UPDATED'] }))).toEqual([...moved, 'r1']);
    expect(LOG_BLOCK).toBeGreaterThan(100);
  }, 60_000);
});

describe("a scope's count (GET /sync/status)", () => {
  const target = (model: string): RecordScope => ({ ...scope, connection: 31, model });
  const stored = (of: RecordScope) =>
    (recordModel(connection).collection as unknown as driver.Collection<RecordDoc>).countDocuments({ environment_id: of.environment, connection: of.connection, model: of.model, variant: of.variant, deleted_at: null });

  it('is kept as records are added, written again, deleted and added again, and read with one `_id` lookup', async () => {
    const counted = target('Counted');
    await save(counted, range(0, 300));
    await save(counted, range(0, 50));
    await save(counted, range(250, 320));
    await save(counted, range(0, 40), 'DELETED');
    await save(counted, range(0, 10), 'ADDED');
    expect(await stored(counted)).toBe(290);
    const { connection: watched, commands, close } = await watchCommands(mongo.uri, dbName);
    try {
      commands.length = 0;
      expect(await createRecordRepo(watched).count(counted)).toBe(290);
      // (Creating the repository's models may send index commands besides.)
      const reads = commands.filter((command) => ['find', 'count', 'aggregate', 'distinct'].includes(command.name));
      expect(reads.map((command) => command.name)).toEqual(['find']);
      expect(Object.keys(reads[0]!.body['filter'] as object)).toEqual(['_id']);
    } finally {
      await close();
    }
  }, 60_000);

  it('counts the records a stopped writer stored when they are read, once', async () => {
    const counted = target('CountedStopped');
    await insertFirst(counted, range(0, 100));
    const publish = jest.spyOn(recordSequenceModel(connection).collection, 'updateOne').mockRejectedValueOnce(new Error('writer stopped'));
    await expect(insertFirst(counted, range(100, 200))).rejects.toThrow('writer stopped');
    publish.mockRestore();
    // Stored, not yet readable.
    expect(await repo.count(counted)).toBe(100);
    await insertFirst(counted, range(100, 200));
    expect(await repo.count(counted)).toBe(200);
    // Written again with changes, after another stop: each still once.
    const again = jest.spyOn(recordSequenceModel(connection).collection, 'updateOne').mockRejectedValueOnce(new Error('writer stopped'));
    await expect(save(counted, range(200, 220))).rejects.toThrow('writer stopped');
    again.mockRestore();
    await save(counted, range(200, 220), 'UPDATED', new Date(Date.now() + 1000));
    expect(await repo.count(counted)).toBe(220);
    expect(await stored(counted)).toBe(220);
  }, 60_000);

  it('of a scope stored before counts were kept: counted from its records until it is settled once, kept from then on', async () => {
    const counted = target('CountedBefore');
    await save(counted, range(0, 120));
    // As a head was before: no count.
    const heads = recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; live?: number }>;
    await heads.updateOne(recordQueries.sequence(counted), { $unset: { live: '', live_visible: '', live_from: '' } });
    expect(await repo.count(counted)).toBe(120);
    await save(counted, range(115, 130));
    expect(await repo.keptCount(counted)).toBeNull();
    expect(await repo.count(counted)).toBe(130);
    expect(await repo.settleCount(counted)).toBe(130);
    expect(await repo.keptCount(counted)).toBe(130);
    await save(counted, range(125, 135));
    expect(await repo.count(counted)).toBe(135);
  }, 60_000);

  it('is not taken from a head that a replica keeping no count cleared (a rolling upgrade), until it is settled again', async () => {
    const counted = target('CountedOldClear');
    // Past a log block: the previous version's clear raises `from` past it (see operations.md, Upgrading).
    await save(counted, range(0, LOG_BLOCK + 10));
    // The previous version's clear: the log and records go, `from` rises, the count is left as it was.
    const heads = recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number; live?: number }>;
    const before = await heads.findOne(recordQueries.sequence(counted));
    await heads.updateOne(recordQueries.sequence(counted), { $set: { blocks: {} }, $max: { from: Math.floor((before!.seq + 1) / LOG_BLOCK) } } as never);
    await (recordModel(connection).collection as unknown as driver.Collection<RecordDoc>).deleteMany({ environment_id: counted.environment, connection: counted.connection, model: counted.model });
    expect(await repo.count(counted)).toBe(0);
    await save(counted, range(0, 3));
    expect(await repo.count(counted)).toBe(3);
    expect(await repo.settleCount(counted)).toBe(3);
    expect((await heads.findOne(recordQueries.sequence(counted)))?.live).toBe(3);
  }, 60_000);

  it('stays exact when a writer stopped half-way through storing its records', async () => {
    const counted = target('CountedHalfway');
    await save(counted, range(0, 100));
    // A deletion of 60 records stops after storing 25 of them.
    const collection = recordModel(connection).collection;
    const original = collection.updateOne.bind(collection);
    let calls = 0;
    const stop = jest.spyOn(collection, 'updateOne').mockImplementation(((...args: Parameters<typeof original>) => (++calls > 25 ? Promise.reject(new Error('writer stopped')) : original(...args))) as never);
    await expect(save(counted, range(0, 60), 'DELETED')).rejects.toThrow('writer stopped');
    stop.mockRestore();
    // Its retry, as the records handler makes it: what it finds deleted is unchanged, not written again.
    const live = (await repo.findByIds(counted, range(0, 60))).filter((doc) => doc.deleted_at === null).map((doc) => doc.external_id);
    expect(live.length).toBeLessThan(60);
    await save(counted, live, 'DELETED');
    expect(await stored(counted)).toBe(40);
    expect(await repo.count(counted)).toBe(40);
  }, 60_000);

  it('is nothing once the scope is cleared', async () => {
    const counted = target('CountedCleared');
    await save(counted, range(0, 30));
    await repo.clear(counted);
    expect(await repo.count(counted)).toBe(0);
    await save(counted, range(0, 3));
    expect(await repo.count(counted)).toBe(3);
  }, 60_000);
});
