import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { serializedScheduleWrites } from './schedule-writes.js';

const logger = createLogger({ service: 'test', level: 'error' });
const environment = environmentId('env_schedule_writes');
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two scheduler replicas' repositories: one database, one lock bucket. */
let replicas: ScheduleRepo[];

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  const locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `schedule_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('schedule_writes'), logger });
  const repo = createScheduleRepo(connection);
  await repo.init();
  replicas = [serializedScheduleWrites(repo, locks), serializedScheduleWrites(createScheduleRepo(connection), locks)];
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

describe('writes to one schedule from two replicas at once', () => {
  // FerretDB writes an updated document back whole: a user's pause or frequency change meeting
  // a run's progress report lost one of them (the pause, or the checkpoint the run resumes from).
  it('keep a pause and a frequency change made while the run in flight reports its checkpoints', async () => {
    const target = { provider_config_key: 'crm', connection_id: 'c1', sync_name: 'contacts', variant: 'base' };
    await replicas[0]!.ensure(environment, target, 'every hour', new Date());
    const schedule = (await replicas[0]!.get(environment, target))!;
    const now = new Date();
    const run = (await replicas[0]!.claim(schedule, `run-${randomBytes(4).toString('hex')}`, new Date(now.getTime() + 3_600_000), now))!;
    await replicas[1]!.markStarted(run, new Date());
    const override = new Date(now.getTime() + 7_200_000);
    await Promise.all([
      ...Array.from({ length: 12 }, (_, page) => replicas[page % 2]!.recordProgress(run, { Contact: { added: page, updated: 0, deleted: 0 } }, { page }, new Date())),
      replicas[1]!.setPaused([schedule._id], true),
      replicas[0]!.setFrequencyOverride(schedule._id, 'every 2 hours', override),
    ]);
    const stored = (await replicas[0]!.get(environment, target))!;
    expect(stored).toMatchObject({ paused: true, frequency_override: 'every 2 hours', running: run._id });
    expect(stored.next_run_at).toEqual(override);
    expect(stored.checkpoint).toEqual({ page: expect.any(Number) });
    expect(await replicas[0]!.getRun(environment, run._id)).toMatchObject({ status: 'RUNNING' });
  }, 30_000);
});
