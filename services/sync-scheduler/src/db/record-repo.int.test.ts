import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { recordModel, recordSequenceModel, type RecordDoc } from './record-model.js';
import { createRecordRepo, recordQueries, type RecordRepo, type RecordScope } from './record-repo.js';

let mongo: TestMongo;
let connection: Connection;
let repo: RecordRepo;

const scope: RecordScope = { environment: environmentId('env_a'), connection: 7, model: 'Contact', variant: 'base' };
const write = (id: string, seq: number) => {
  const now = new Date();
  return { external_id: id, payload: JSON.stringify({ id }), hash: id, first_seen_at: now, last_modified_at: now, last_action: 'ADDED' as const, deleted_at: null, pruned_at: null, seq };
};

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('records'), logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createRecordRepo(connection);
  await repo.init();
  // Enough rows that a scan and a lookup differ in the plan, and another scope beside them.
  await repo.insertNew(scope, Array.from({ length: 500 }, (_, i) => write(`r${i}`, i + 1)));
  await repo.insertNew({ ...scope, connection: 8 }, Array.from({ length: 100 }, (_, i) => write(`r${i}`, i + 1)));
  await repo.reserve(scope, 500);
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

/**
 * The write path's lookups, explained on the test database (MongoDB, or FerretDB on SQLite or
 * PostgreSQL): each must be an index lookup, so a re-sync costs the same whatever the scope and
 * the collection hold. A regression to a scan fails here without timing anything.
 */
describe('record lookups are index lookups', () => {
  it('a record by scope and id (the re-sync lookup, and the upsert filter)', async () => {
    const records = recordModel(connection).collection as unknown as driver.Collection<RecordDoc>;
    const verdict = await explainUntilIndexed(() => records.find(recordQueries.byId(scope, 'r250')));
    expect(verdict).toMatchObject({ indexed: true });
    const found = await repo.findByIds(scope, ['r250', 'r3', 'missing']);
    expect(found.map((doc) => doc.external_id).sort()).toEqual(['r250', 'r3']);
    // The other scope's record of the same id is not this one.
    expect(found.every((doc) => doc.connection === scope.connection)).toBe(true);
  }, 20_000);

  it("a scope's sequence counter (reserving sequence numbers)", async () => {
    const sequences = recordSequenceModel(connection).collection as unknown as driver.Collection<{ _id: string; seq: number }>;
    const verdict = await explainUntilIndexed(() => sequences.find(recordQueries.sequence(scope)));
    expect(verdict).toMatchObject({ indexed: true });
  }, 20_000);
});
