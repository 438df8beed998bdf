import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createRecordRepo, type RecordRepo, type RecordScope } from '../db/record-repo.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { connectionDeletedHandler } from './connection-deleted.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let connection: Connection;
let schedules: ScheduleRepo;
let records: RecordRepo;

const env = environmentId('env_a');
const scopeOf = (connection: number): RecordScope => ({ environment: env, connection, model: 'Ticket', variant: 'base' });
const event = (id: number, connectionId: string) => ({ environment_id: 'env_a', id, connection_id: connectionId, provider_config_key: 'crm', provider: 'crm' });

async function seed(id: number, connectionId: string): Promise<void> {
  for (const sync_name of ['tickets', 'users']) {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: connectionId, sync_name, variant: 'base' }, 'every hour', new Date());
  }
  const scope = scopeOf(id);
  const first = await records.reserve(scope, 3);
  const now = new Date();
  await records.insertNew(
    scope,
    [0, 1, 2].map((n) => ({
      external_id: `t-${n}`,
      payload: JSON.stringify({ id: `t-${n}` }),
      hash: `h-${n}`,
      first_seen_at: now,
      last_modified_at: now,
      last_action: 'ADDED' as const,
      deleted_at: null,
      pruned_at: null,
      seq: first + n,
    })),
  );
}

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('scheduler'), logger });
  schedules = createScheduleRepo(connection);
  records = createRecordRepo(connection);
  await Promise.all([schedules.init(), records.init()]);
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('connection.deleted', () => {
  // Not visible through the API once the connection is gone (status and records answer only for
  // connections the vault still has), so checked here rather than end to end.
  it('takes the connection’s schedules and records with it, and leaves every other connection’s', async () => {
    await seed(7, 'gone');
    await seed(8, 'kept');
    expect(await schedules.list(env, 'crm', 'gone')).toHaveLength(2);
    expect(await records.count(scopeOf(7))).toBe(3);

    // The vault has neither any more.
    const handle = connectionDeletedHandler({ schedules, records, logger, holderOf: async () => null });
    await handle(event(7, 'gone'));
    expect(await schedules.list(env, 'crm', 'gone')).toEqual([]);
    expect(await records.count(scopeOf(7))).toBe(0);
    expect(await schedules.list(env, 'crm', 'kept')).toHaveLength(2);
    expect(await records.count(scopeOf(8))).toBe(3);

    // A redelivery changes nothing.
    await handle(event(7, 'gone'));
    expect(await schedules.list(env, 'crm', 'kept')).toHaveLength(2);
    expect(await records.count(scopeOf(8))).toBe(3);
  });

  it('leaves the schedules of a new connection that took the name, and still deletes the old one\'s records', async () => {
    await seed(17, 'reused');
    await seed(18, 'reused');
    const handle = connectionDeletedHandler({ schedules, records, logger, holderOf: async () => 18 });
    await handle(event(17, 'reused'));
    expect(await schedules.list(env, 'crm', 'reused')).toHaveLength(2);
    expect(await records.count(scopeOf(17))).toBe(0);
    expect(await records.count(scopeOf(18))).toBe(3);
  });
});
