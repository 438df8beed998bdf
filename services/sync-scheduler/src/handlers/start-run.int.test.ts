import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createRecordRepo, type RecordRepo, type RecordScope } from '../db/record-repo.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { startRun } from './syncs.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let nats: TestNats;
let connection: Connection;
let bus: Bus;
let schedules: ScheduleRepo;
let records: RecordRepo;

const env = environmentId('env_a');
const scope: RecordScope = { environment: env, connection: 1, model: 'Ticket', variant: 'base' };

beforeAll(async () => {
  [mongo, nats] = await Promise.all([startMongo(), startNats()]);
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('scheduler'), logger });
  schedules = createScheduleRepo(connection);
  records = createRecordRepo(connection);
  await Promise.all([schedules.init(), records.init()]);
  bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('sync-scheduler'), logger, requestTimeoutMs: 5_000 });
  await ensureStreams(bus);
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([mongo?.dispose(), nats?.dispose()]);
});

describe('a full resync triggered while the scheduler starts a run', () => {
  it('clears nothing when the schedule it read as idle was claimed meanwhile: the run in flight keeps its records', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-1', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    // What the trigger read: the schedule idle.
    const [readByTrigger] = await schedules.list(env, 'crm', 'c-1');
    expect(readByTrigger?.running).toBeNull();
    const deps = { bus, schedules, minFrequencyMs: 60_000 };

    // The scheduler starts a run of it, which saves records.
    expect(await startRun(deps, readByTrigger!, new Date())).toBe(true);
    const first = await records.reserve(scope, 3);
    const now = new Date();
    await records.insertNew(
      scope,
      [0, 1, 2].map((n) => ({ external_id: `t-${n}`, payload: '{}', hash: `h-${n}`, first_seen_at: now, last_modified_at: now, last_action: 'ADDED' as const, deleted_at: null, pruned_at: null, seq: first + n })),
    );

    // The trigger, on its stale read, would clear the records before queueing: not once claimed by another.
    let cleared = false;
    const queued = await startRun(deps, readByTrigger!, new Date(), async () => {
      cleared = true;
      await records.clear(scope);
    });
    expect(queued).toBe(false);
    expect(cleared).toBe(false);
    expect(await records.count(scope)).toBe(3);
  });
});

describe('a run whose job never came', () => {
  it('gives its schedule back once it has waited unstarted past the limit, and its late job finds it over', async () => {
    const shortLived = createScheduleRepo(connection, { unstartedRunMs: 60_000 });
    await shortLived.ensure(env, { provider_config_key: 'crm', connection_id: 'c-2', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await shortLived.list(env, 'crm', 'c-2');
    const deps = { bus, schedules: shortLived, minFrequencyMs: 60_000 };
    // A scheduler replica claims the schedule and dies before it queues the job.
    const claimedAt = new Date();
    const orphan = await shortLived.claim(schedule!, 'orphan-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    expect(orphan?.status).toBe('QUEUED');

    // Within the limit the claim holds: still one run at a time.
    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 59_000))).toBe(false);
    // Past it, not in an hour: a new run takes the schedule, and the orphan is over.
    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 61_000))).toBe(true);
    expect((await shortLived.getRun(env, 'orphan-run'))?.status).toBe('ERROR');
    expect((await shortLived.getRun(env, 'orphan-run'))?.error?.code).toBe('sync_run_abandoned');
  });

  it('keeps the schedule of a run that began, however long past the unstarted limit (until the stale limit)', async () => {
    const shortLived = createScheduleRepo(connection, { unstartedRunMs: 60_000, staleRunMs: 3_600_000 });
    await shortLived.ensure(env, { provider_config_key: 'crm', connection_id: 'c-3', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await shortLived.list(env, 'crm', 'c-3');
    const deps = { bus, schedules: shortLived, minFrequencyMs: 60_000 };
    const claimedAt = new Date();
    const begun = await shortLived.claim(schedule!, 'begun-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    await shortLived.markStarted(begun!, new Date(claimedAt.getTime() + 1_000));

    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 600_000))).toBe(false);
    expect((await shortLived.getRun(env, 'begun-run'))?.status).toBe('RUNNING');
  });
});
