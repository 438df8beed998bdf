import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createRecordRepo, type RecordRepo, type RecordScope } from '../db/record-repo.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { createDeploymentRepo } from '../db/deployment-repo.js';
import { CONNECTION_DELETION_SECOND_PASS_MS, connectionDeletedHandler } from './connection-deleted.js';
import { connectionCreatedHandler } from './syncs.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let connection: Connection;
let schedules: ScheduleRepo;
let records: RecordRepo;

const env = environmentId('env_a');
const scopeOf = (connection: number): RecordScope => ({ environment: env, connection, model: 'Ticket', variant: 'base' });
const event = (id: number, connectionId: string) => ({ environment_id: 'env_a', id, connection_id: connectionId, provider_config_key: 'crm', provider: 'crm' });

/** `legacy`: schedules as they were made before they kept their connection's numeric id. */
async function seed(id: number, connectionId: string, options: { legacy?: boolean } = {}): Promise<void> {
  for (const sync_name of ['tickets', 'users']) {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: connectionId, sync_name, variant: 'base' }, 'every hour', new Date(), options.legacy ? undefined : id);
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

  it('leaves the schedules (made before they kept their connection\'s id) of a new connection that took the name, and still deletes the old one\'s records', async () => {
    await seed(17, 'reused', { legacy: true });
    await seed(18, 'reused', { legacy: true });
    const handle = connectionDeletedHandler({ schedules, records, logger, holderOf: async () => 18 });
    await handle(event(17, 'reused'));
    expect(await schedules.list(env, 'crm', 'reused')).toHaveLength(2);
    expect(await records.count(scopeOf(17))).toBe(0);
    expect(await records.count(scopeOf(18))).toBe(3);
  });
});

describe('records written while the connection is deleted', () => {
  // A write that took its scope before the deletion (a 10,000-record batch takes up to two
  // minutes) stored its records after the deletion's: kept for good under a connection that no
  // longer exists, the customer's deleted data among them.
  it('are deleted by a second pass once any write begun before the deletion has ended', async () => {
    await seed(47, 'late-writes');
    const handle = connectionDeletedHandler({ schedules, records, logger, holderOf: async () => null });
    const heardAt = Date.now();
    const delivered = (ageMs: number) => ({ info: { timestampNanos: (heardAt - ageMs) * 1e6 } });
    const first = await handle(event(47, 'late-writes'), delivered(0));
    expect(await records.count(scopeOf(47))).toBe(0);
    expect(first).toEqual({ retryInMs: expect.any(Number) });
    expect((first as { retryInMs: number }).retryInMs).toBeGreaterThanOrEqual(CONNECTION_DELETION_SECOND_PASS_MS - 1_000);

    // The write in flight stores its records now.
    await seed(47, 'late-writes-again');
    expect(await records.count(scopeOf(47))).toBe(3);
    // A redelivery before then (an outage of ours) waits for the rest of the time.
    const early = await handle(event(47, 'late-writes'), delivered(CONNECTION_DELETION_SECOND_PASS_MS / 2));
    expect((early as { retryInMs: number }).retryInMs).toBeLessThanOrEqual(CONNECTION_DELETION_SECOND_PASS_MS / 2 + 1_000);
    expect(await handle(event(47, 'late-writes'), delivered(CONNECTION_DELETION_SECOND_PASS_MS))).toBeUndefined();
    expect(await records.count(scopeOf(47))).toBe(0);
  });
});

describe('a name deleted and taken again at once', () => {
  // DELETE then POST of the same connection_id: the new connection's creation may be heard first.
  it('starts the new connection afresh, its creation heard before the old one\'s deletion: no schedule, checkpoint or run of the old one carries over', async () => {
    const deployments = createDeploymentRepo(connection);
    const sync = (name: string) => ({ type: 'sync' as const, name, description: { type: 'sync' as const, name, frequency: 'every hour', models: [{ name: 'Ticket', fields: [{ name: 'id', type: 'string' }] }], webhook_subscriptions: [] }, bundle: 'module.exports = {}' });
    await deployments.insertNext(env, 'crm', [sync('tickets'), sync('users')]);
    await seed(27, 'again');
    // The old connection's run is in flight and has a checkpoint.
    const [old] = (await schedules.list(env, 'crm', 'again')).filter((schedule) => schedule.sync_name === 'tickets');
    const claimedAt = new Date();
    const run = (await schedules.claim(old!, 'old-connection-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt))!;
    await schedules.beginAttempt(run, claimedAt);
    expect(await schedules.recordProgress(run, {}, { page: 40 }, new Date())).toBe(true);

    await connectionCreatedHandler({ schedules, deployments, logger, holderOf: async () => 28 } as unknown as Parameters<typeof connectionCreatedHandler>[0])(event(28, 'again'));
    const fresh = await schedules.list(env, 'crm', 'again');
    expect(fresh.map((schedule) => schedule.connection).sort()).toEqual([28, 28]);
    expect((await schedules.getSchedule(old!._id))?.checkpoint).toBeNull();
    expect(fresh.every((schedule) => schedule.running === null)).toBe(true);
    expect((await schedules.getRun(env, 'old-connection-run'))?.status).toBe('ERROR');
    // The old run, still going, writes no checkpoint into the new connection's schedule.
    expect(await schedules.recordProgress(run, {}, { page: 41 }, new Date())).toBe(false);

    // The old one's deletion, heard now, leaves the new connection's schedules.
    await connectionDeletedHandler({ schedules, records, logger, holderOf: async () => 28 })(event(27, 'again'));
    expect((await schedules.list(env, 'crm', 'again')).map((schedule) => schedule.connection)).toEqual([28, 28]);

    // The old one's creation, redelivered after an outage and heard last, is nobody's now.
    const late = await schedules.list(env, 'crm', 'again');
    await connectionCreatedHandler({ schedules, deployments, logger, holderOf: async () => 28 } as unknown as Parameters<typeof connectionCreatedHandler>[0])(event(27, 'again'));
    expect(await schedules.list(env, 'crm', 'again')).toEqual(late);
  });

  it('takes a variant made for the old connection with it too', async () => {
    const key = { provider_config_key: 'crm', connection_id: 'variant-again', sync_name: 'tickets', variant: 'eu' };
    await schedules.ensure(env, key, 'every hour', new Date(), 37);
    await connectionCreatedHandler({ schedules, deployments: createDeploymentRepo(connection), logger, holderOf: async () => 38 } as unknown as Parameters<typeof connectionCreatedHandler>[0])(event(38, 'variant-again'));
    expect((await schedules.list(env, 'crm', 'variant-again')).map((schedule) => [schedule.variant, schedule.connection])).toEqual([
      ['base', 38],
      ['base', 38],
    ]);
  });
});
