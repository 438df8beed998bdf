import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, ensureStreams, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, watchCommands, type TestMongo, type TestNats } from '@latchkey/testing';
import { STREAMS, syncContracts, vaultContracts } from '@latchkey/contracts';
import { createDeploymentRepo } from '../db/deployment-repo.js';
import { createRecordRepo, type RecordRepo, type RecordScope } from '../db/record-repo.js';
import { syncRunModel } from '../db/schedule-model.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { serializedScheduleWrites } from '../domain/schedule-writes.js';
import { serializedRecordWrites } from '../domain/record-writes.js';
import { listRecordsHandler, writeRecordsHandler } from './records.js';
import { beginRunHandler, deleteVariantHandler, finishRunHandler, reportProgressHandler, startRun, statusHandler, triggerHandler, type SyncsDeps } from './syncs.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let nats: TestNats;
let connection: Connection;
let dbName: string;
let bus: Bus;
let schedules: ScheduleRepo;
let records: RecordRepo;

const env = environmentId('env_a');
const scope: RecordScope = { environment: env, connection: 1, model: 'Ticket', variant: 'base' };

beforeAll(async () => {
  [mongo, nats] = await Promise.all([startMongo(), startNats()]);
  dbName = uniqueDbName('scheduler');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger });
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
    await shortLived.beginAttempt(begun!, new Date(claimedAt.getTime() + 1_000));

    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 600_000))).toBe(false);
    expect((await shortLived.getRun(env, 'begun-run'))?.status).toBe('RUNNING');
  });
});

describe('a run whose job is queued and waits in a backlog (every runner busy)', () => {
  // A run not begun within the unstarted limit was taken for lost though its job was stored:
  // the next claim (a trigger, or the loop's, every 30 s once the schedule was overdue) ended
  // it and queued a new run at the back of the queue, so under load a frequent sync kept being
  // pushed back, and each replaced job cost a delivery that did nothing.
  it('keeps its schedule past the unstarted limit, and is taken for lost only past the stale limit', async () => {
    const patient = createScheduleRepo(connection, { unstartedRunMs: 60_000, staleRunMs: 3_600_000 });
    await patient.ensure(env, { provider_config_key: 'crm', connection_id: 'c-backlog', sync_name: 'tickets', variant: 'base' }, 'every 5 minutes', new Date());
    const [schedule] = await patient.list(env, 'crm', 'c-backlog');
    const deps = { bus, schedules: patient, minFrequencyMs: 60_000 };
    const queuedAt = new Date();
    expect(await startRun(deps, schedule!, queuedAt)).toBe(true);
    const waiting = (await patient.getSchedule(schedule!._id))!.running!;

    // Its job is in JetStream, waiting for a free runner: a trigger past the unstarted limit leaves it be.
    expect(await startRun(deps, schedule!, new Date(queuedAt.getTime() + 61_000))).toBe(false);
    expect((await patient.getRun(env, waiting))?.status).toBe('QUEUED');
    expect((await patient.getSchedule(schedule!._id))?.running).toBe(waiting);
    // A job JetStream never hands out holds the schedule no longer than a run that stopped reporting.
    expect(await startRun(deps, schedule!, new Date(queuedAt.getTime() + 3_600_001))).toBe(true);
    expect((await patient.getRun(env, waiting))?.error?.code).toBe('sync_run_abandoned');
  });

  it('stays begun when its job was delivered and began before the run was marked queued', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-backlog-fast', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-backlog-fast');
    let runId = '';
    const fast = {
      bus: {
        enqueue: async (_contract: unknown, payload: { run_id: string }) => {
          runId = payload.run_id;
          await beginRunHandler({ bus, schedules })({ environment_id: env, run_id: runId });
        },
      } as unknown as Bus,
      schedules,
      minFrequencyMs: 60_000,
    };
    expect(await startRun(fast, schedule!, new Date())).toBe(true);
    expect(await schedules.getRun(env, runId)).toMatchObject({ status: 'RUNNING', attempt: 1 });
  });
});

describe('a schedule left claimed by a replica killed between two writes', () => {
  // What a killed replica leaves: the run's outcome written, the schedule not yet freed.
  const finishCutShort = (runId: string, at: Date) =>
    syncRunModel(connection).updateOne({ _id: runId }, { $set: { status: 'SUCCESS', finished_at: at } }).exec();

  it('is taken back past the unstarted limit when the run holding it is over', async () => {
    const shortLived = createScheduleRepo(connection, { unstartedRunMs: 60_000, staleRunMs: 3_600_000 });
    await shortLived.ensure(env, { provider_config_key: 'crm', connection_id: 'c-4', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await shortLived.list(env, 'crm', 'c-4');
    const deps = { bus, schedules: shortLived, minFrequencyMs: 60_000 };
    const claimedAt = new Date();
    const cut = await shortLived.claim(schedule!, 'cut-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    await shortLived.beginAttempt(cut!, claimedAt);
    await finishCutShort('cut-run', new Date(claimedAt.getTime() + 1_000));

    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 59_000))).toBe(false);
    // Not in an hour: the run is over, nothing holds the schedule any more.
    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 61_000))).toBe(true);
    expect((await shortLived.getRun(env, 'cut-run'))?.status).toBe('SUCCESS');
  });

  it('is taken back past the unstarted limit when its run was never recorded', async () => {
    const shortLived = createScheduleRepo(connection, { unstartedRunMs: 60_000, staleRunMs: 3_600_000 });
    await shortLived.ensure(env, { provider_config_key: 'crm', connection_id: 'c-5', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await shortLived.list(env, 'crm', 'c-5');
    const deps = { bus, schedules: shortLived, minFrequencyMs: 60_000 };
    const claimedAt = new Date();
    await shortLived.claim(schedule!, 'ghost-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    // The claimer died after taking the slot and before recording the run.
    await syncRunModel(connection).deleteOne({ _id: 'ghost-run' }).exec();

    expect(await startRun(deps, schedule!, new Date(claimedAt.getTime() + 61_000))).toBe(true);
  });

  it('is freed at once by the job delivered again, which also announces the run\'s end again', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-6', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-6');
    const claimedAt = new Date();
    const cut = await schedules.claim(schedule!, 'redelivered-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    await schedules.beginAttempt(cut!, claimedAt);
    await finishCutShort('redelivered-run', new Date());
    expect((await schedules.getSchedule(schedule!._id))?.running).toBe('redelivered-run');

    // The runner's finish report got no answer: its job comes back, and finds the run over.
    expect(await beginRunHandler({ bus, schedules })({ environment_id: env, run_id: 'redelivered-run' })).toEqual({ run: null });
    const freed = await schedules.getSchedule(schedule!._id);
    expect({ running: freed?.running, last_status: freed?.last_status }).toEqual({ running: null, last_status: 'SUCCESS' });
    const observer = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    try {
      const announced = await (await observer.jetstreamManager()).streams.getMessage(STREAMS.events.name, { last_by_subj: syncContracts.runCompleted.subject });
      expect(announced?.json<{ run_id: string }>().run_id).toBe('redelivered-run');
    } finally {
      await observer.drain();
    }
    // A later claim starts a run at once.
    expect(await startRun({ bus, schedules, minFrequencyMs: 60_000 }, schedule!, new Date())).toBe(true);
  });
});

describe('a run whose job could not be queued', () => {
  it('is over before its schedule is given back: a job stored after all runs nothing', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-7', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-7');
    let runId = '';
    const failing = {
      bus: {
        enqueue: async (_contract: unknown, payload: { run_id: string }) => {
          runId = payload.run_id;
          throw new Error('no acknowledgement from JetStream (the message may be stored)');
        },
      } as unknown as Bus,
      schedules,
      minFrequencyMs: 60_000,
    };
    await expect(startRun(failing, schedule!, new Date())).rejects.toThrow('no acknowledgement');
    expect((await schedules.getSchedule(schedule!._id))?.running).toBeNull();
    expect((await schedules.getRun(env, runId))?.status).toBe('ERROR');
    // Its job, stored after all, is delivered: nothing runs beside the next run.
    expect(await beginRunHandler({ bus, schedules })({ environment_id: env, run_id: runId })).toEqual({ run: null });
  });

  it('frees its schedule when the first give-back ended the run and then stopped short', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-9', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-9');
    let cutShort = true;
    const failing = {
      bus: {
        enqueue: async () => {
          throw new Error('no acknowledgement from JetStream (the message may be stored)');
        },
      } as unknown as Bus,
      schedules: {
        ...schedules,
        // The first give-back's first write lands (the run is ended), then the database goes away.
        abandonUnqueued: async (run: Parameters<ScheduleRepo['abandonUnqueued']>[0], now: Date) => {
          if (!cutShort) return schedules.abandonUnqueued(run, now);
          cutShort = false;
          await syncRunModel(connection).updateOne({ _id: run._id }, { $set: { status: 'ERROR', error: { code: 'sync_run_abandoned', message: 'cut short' }, finished_at: now } }).exec();
          throw new Error('the database went away');
        },
      },
      minFrequencyMs: 60_000,
    };
    await expect(startRun(failing, schedule!, new Date())).rejects.toThrow('no acknowledgement');
    const deadline = Date.now() + 10_000;
    while ((await schedules.getSchedule(schedule!._id))?.running !== null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await schedules.getSchedule(schedule!._id))?.running).toBeNull();
    expect(await startRun({ bus, schedules, minFrequencyMs: 60_000 }, schedule!, new Date())).toBe(true);
  }, 30_000);

  it('keeps its schedule when the job arrived and the run began meanwhile', async () => {
    await schedules.ensure(env, { provider_config_key: 'crm', connection_id: 'c-8', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-8');
    let runId = '';
    const slow = {
      bus: {
        enqueue: async (_contract: unknown, payload: { run_id: string }) => {
          runId = payload.run_id;
          // Stored, and begun by a runner, before the publish gave up waiting for its acknowledgement.
          await beginRunHandler({ bus, schedules })({ environment_id: env, run_id: runId });
          throw new Error('no acknowledgement from JetStream (the message may be stored)');
        },
      } as unknown as Bus,
      schedules,
      minFrequencyMs: 60_000,
    };
    await expect(startRun(slow, schedule!, new Date())).rejects.toThrow('no acknowledgement');
    expect((await schedules.getSchedule(schedule!._id))?.running).toBe(runId);
    expect((await schedules.getRun(env, runId))?.status).toBe('RUNNING');
  });
});

describe('a run whose job could not be queued because the bus was away', () => {
  it('gives its schedule back soon after the bus returns, not once the claim has aged past the unstarted limit', async () => {
    // As the service runs it: every schedule write holds the schedule's key in NATS KV, so the
    // bus that failed the job also fails giving the schedule back.
    const locked = serializedScheduleWrites(createScheduleRepo(connection), createKvLocks(await openKv<{ owner: string }>(bus, { name: 'sync_schedule_locks', ttlMs: WRITE_KEYS.ttlMs })));
    await locked.ensure(env, { provider_config_key: 'crm', connection_id: 'c-7', sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
    const [schedule] = await locked.list(env, 'crm', 'c-7');
    const deps = { bus, schedules: locked, minFrequencyMs: 60_000 };

    // The bus goes away once the schedule is claimed, before the job is queued.
    await expect(startRun(deps, schedule!, new Date(), () => nats.stop())).rejects.toMatchObject({ code: 'service_unavailable' });
    await nats.start();

    const deadline = Date.now() + 20_000;
    while ((await locked.getSchedule(schedule!._id))?.running !== null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await locked.getSchedule(schedule!._id))?.running).toBeNull();
    expect(await startRun(deps, schedule!, new Date())).toBe(true);
  }, 60_000);
});

/** A new schedule of `key` with run `runId` claimed and started on it. */
async function runningOn(key: { provider_config_key: string; connection_id: string; sync_name: string; variant: string }, runId: string) {
  await schedules.ensure(env, key, 'every hour', new Date());
  const schedule = (await schedules.list(env, key.provider_config_key, key.connection_id)).find((doc) => doc.variant === key.variant)!;
  const claimedAt = new Date();
  const run = (await schedules.claim(schedule, runId, new Date(claimedAt.getTime() + 3_600_000), claimedAt))!;
  await schedules.beginAttempt(run, claimedAt);
  return { schedule, run };
}

describe('a schedule removed while its run is in flight (a variant deleted, its connection gone)', () => {
  it('ends the run, so its checkpoint and its end are refused and a schedule made again in its place has no second run beside it', async () => {
    const key = { provider_config_key: 'crm', connection_id: 'c-removed', sync_name: 'tickets', variant: 'eu' };
    const { schedule, run } = await runningOn(key, 'removed-run');

    await schedules.remove([schedule._id]);
    expect((await schedules.getRun(env, 'removed-run'))?.status).toBe('ERROR');
    // The run, still going, learns it is over at its next checkpoint, and its end changes nothing.
    expect(await schedules.recordProgress(run, {}, { cursor: 'page-9' }, new Date())).toBe(false);
    expect(await schedules.finish(run, { status: 'SUCCESS', results: {}, error: null }, new Date())).toBe(false);
    // The variant made again: its schedule (same id) starts afresh, with no checkpoint of the old run.
    await schedules.ensure(env, key, 'every hour', new Date());
    const [again] = await schedules.list(env, 'crm', 'c-removed');
    expect(again?._id).toBe(schedule._id);
    expect((await schedules.getSchedule(schedule._id))?.checkpoint).toBeNull();

    // The runner, its next write refused, finishes the run as failed: nothing is announced (the
    // vault would mark the connection's sync failed, for a variant that no longer runs).
    const finish = finishRunHandler({ bus, schedules, operations: { record: () => undefined } } as unknown as SyncsDeps);
    expect(await finish({ environment_id: env, run_id: 'removed-run', status: 'ERROR', results: {}, error: { code: 'function_failed', message: 'its write was refused' } })).toEqual({ recorded: false });
    const observer = await createBus({ servers: nats.url, service: 'observer', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    const jsm = await observer.jetstreamManager();
    const last = await jsm.streams.getMessage(STREAMS.events.name, { last_by_subj: syncContracts.runFailed.subject }).catch(() => undefined);
    await observer.close();
    expect(last?.json<{ run_id: string }>().run_id).not.toBe('removed-run');
  });
});

describe('a schedule removed while its run is in flight, on FerretDB', () => {
  /** The filters of the finds, updates and deletes among `commands`. */
  const filtersOf = (commands: Array<{ name: string; body: Record<string, unknown> }>) =>
    commands.flatMap(({ name, body }) => {
      if (name === 'find') return [body['filter'] as Record<string, unknown>];
      if (name === 'update') return (body['updates'] as Array<{ q: Record<string, unknown> }>).map((update) => update.q);
      if (name === 'delete') return (body['deletes'] as Array<{ q: Record<string, unknown> }>).map((deletion) => deletion.q);
      return [];
    });

  // Its run was ended with `_id: {$in: …}`, which FerretDB answers by reading every run ever
  // kept: each variant or connection deleted while its sync ran read the whole collection.
  it('reads and writes its slot, its run and itself by `_id` alone', async () => {
    const { schedule } = await runningOn({ provider_config_key: 'crm', connection_id: 'c-removed-by-id', sync_name: 'tickets', variant: 'eu' }, 'removed-by-id-run');
    const watched = await watchCommands(mongo.uri, dbName);
    try {
      await createScheduleRepo(watched.connection).remove([schedule._id]);
      const filters = filtersOf(watched.commands);
      expect(filters.length).toBeGreaterThanOrEqual(4);
      expect(filters.filter((filter) => typeof filter['_id'] !== 'string')).toEqual([]);
    } finally {
      await watched.close();
    }
    expect((await schedules.getRun(env, 'removed-by-id-run'))?.error?.code).toBe('sync_run_abandoned');
    expect(await schedules.getSchedule(schedule._id)).toBeNull();
  });
});

describe('old sync runs', () => {
  // Nothing deleted a run: one document per run queued, kept for ever.
  it('go once finished past the retention, or never finished past the jobs\' age and the retention; the others stay', async () => {
    const runs = syncRunModel(connection);
    const day = 86_400_000;
    const now = Date.now();
    const run = (id: string, createdAt: number, finishedAt: number | null, status: 'QUEUED' | 'RUNNING' | 'SUCCESS') => ({
      _id: id,
      environment_id: env,
      schedule_id: 'sweep-schedule',
      provider_config_key: 'crm',
      connection_id: 'c-sweep',
      sync_name: 'tickets',
      variant: 'base',
      status,
      results: {},
      error: null,
      created_at: new Date(createdAt),
      started_at: null,
      finished_at: finishedAt === null ? null : new Date(finishedAt),
    });
    await runs.insertMany([
      ...Array.from({ length: 7 }, (_, n) => run(`sweep-old-${n}`, now - 10 * day, now - 9 * day, 'SUCCESS')),
      run('sweep-recent', now - 2 * day, now - day, 'SUCCESS'),
      run('sweep-lost', now - 20 * day, null, 'QUEUED'),
      run('sweep-unfinished', now - 10 * day, null, 'QUEUED'),
      run('sweep-live', now, null, 'RUNNING'),
    ]);
    // Three at a time: a sweep takes the collection a bounded batch at a time.
    expect(await schedules.removeOldRuns({ finishedBefore: new Date(now - 7 * day), unfinishedCreatedBefore: new Date(now - 14 * day) }, 3)).toBe(8);
    const left = await runs.find({ schedule_id: 'sweep-schedule' }, { _id: 1 }).lean().exec();
    expect(left.map((doc) => doc._id).sort()).toEqual(['sweep-live', 'sweep-recent', 'sweep-unfinished']);
  });
});

describe('a run whose job is delivered again while its first attempt still goes (its replica cut off from NATS past the ack wait)', () => {
  it("refuses the first attempt's writes, progress and end once the second began: the second's newer records, checkpoint and end stand", async () => {
    const key = { provider_config_key: 'crm', connection_id: 'c-twice', sync_name: 'tickets', variant: 'base' };
    await schedules.ensure(env, key, 'every hour', new Date());
    const [schedule] = await schedules.list(env, 'crm', 'c-twice');
    const claimedAt = new Date();
    await schedules.claim(schedule!, 'twice-run', new Date(claimedAt.getTime() + 3_600_000), claimedAt);
    const begin = beginRunHandler({ bus, schedules });
    const first = (await begin({ environment_id: env, run_id: 'twice-run' })).run;
    const second = (await begin({ environment_id: env, run_id: 'twice-run' })).run;
    expect([first?.attempt, second?.attempt]).toEqual([1, 2]);
    expect(second?.started_at).toBe(first?.started_at);

    const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
    vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 11, connection_id, provider_config_key, provider: 'crm' }));
    await vault.flush();
    try {
      const locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: 'sync_schedule_locks', ttlMs: WRITE_KEYS.ttlMs }));
      const write = writeRecordsHandler({ bus, records: serializedRecordWrites(records, locks), runs: schedules });
      const batch = (attempt: number, title: string) =>
        write({ environment_id: env, ...key, model: 'Ticket', variant: 'base', mode: 'save', records: [{ id: 't-1', title }], run_id: 'twice-run', attempt });
      expect((await batch(2, 'newer')).added).toBe(1);
      // The first attempt, still going, writes the older page it fetched: refused.
      await expect(batch(1, 'older')).rejects.toMatchObject({ code: 'function_failed' });
      const listed = await listRecordsHandler({ bus, records: serializedRecordWrites(records, locks) })({ environment_id: env, ...key, model: 'Ticket', variant: 'base', limit: 10 });
      expect(listed.records.map((record) => record['title'])).toEqual(['newer']);
    } finally {
      await vault.drain();
    }

    // Its checkpoint and its end change nothing: the second attempt's stand, and end the run.
    const progress = reportProgressHandler({ bus, schedules, operations: { record: () => undefined } } as unknown as SyncsDeps);
    expect(await progress({ environment_id: env, run_id: 'twice-run', attempt: 2, results: {}, checkpoint: { page: 7 } })).toEqual({ recorded: true });
    expect(await progress({ environment_id: env, run_id: 'twice-run', attempt: 1, results: {}, checkpoint: { page: 3 } })).toEqual({ recorded: false });
    expect((await schedules.getSchedule(schedule!._id))?.checkpoint).toEqual({ page: 7 });
    const finish = finishRunHandler({ bus, schedules, operations: { record: () => undefined } } as unknown as SyncsDeps);
    expect(await finish({ environment_id: env, run_id: 'twice-run', attempt: 1, status: 'ERROR', results: {}, error: { code: 'function_failed', message: 'its write was refused' } })).toEqual({ recorded: false });
    expect((await schedules.getRun(env, 'twice-run'))?.status).toBe('RUNNING');
    expect((await schedules.getSchedule(schedule!._id))?.running).toBe('twice-run');
    expect(await finish({ environment_id: env, run_id: 'twice-run', attempt: 2, status: 'SUCCESS', results: {} })).toEqual({ recorded: true });
    expect((await schedules.getRun(env, 'twice-run'))?.status).toBe('SUCCESS');
  });
});

describe('a checkpoint', () => {
  // Any JSON object is a checkpoint; a document database's rules on field names are not the function's concern.
  it('is kept as the function saved it, whatever its keys and nesting', async () => {
    const { schedule, run } = await runningOn({ provider_config_key: 'crm', connection_id: 'c-checkpoint-keys', sync_name: 'tickets', variant: 'base' }, 'checkpoint-keys-run');
    const checkpoint = { 'filter.since': '2026-11-01', $cursor: 'abc', cursors: [['a', 1], ['b', 2]], nested: { 'x.y': { $z: null } } };
    expect(await schedules.recordProgress(run, {}, checkpoint, new Date())).toBe(true);
    expect((await schedules.getSchedule(schedule._id))?.checkpoint).toEqual(checkpoint);
  });
});

describe("the leader's whole read of the schedules", () => {
  // Every full read (each rescan, each change of leader) held every schedule's checkpoint, up to
  // 64 KiB each, though the due index needs only their times and state.
  it('leaves out what only a run reads: checkpoints and last results', async () => {
    const { schedule, run } = await runningOn({ provider_config_key: 'crm', connection_id: 'c-whole-read', sync_name: 'tickets', variant: 'base' }, 'whole-read-run');
    expect(await schedules.recordProgress(run, { Ticket: { added: 1, updated: 0, deleted: 0 } }, { cursor: 'x'.repeat(32_000) }, new Date())).toBe(true);
    expect((await schedules.getSchedule(schedule._id))?.checkpoint).toEqual({ cursor: 'x'.repeat(32_000) });
    const read = (await schedules.all()).find((doc) => doc._id === schedule._id);
    expect(read).toMatchObject({ _id: schedule._id, running: 'whole-read-run', paused: false });
    expect(Object.keys(read ?? {})).not.toContain('checkpoint');
    expect(Object.keys(read ?? {})).not.toContain('last_results');
  });
});

describe('POST /sync/trigger, by sync_mode', () => {
  // The vault, played by its own identity, knows connection `c-mode` (numeric id 7).
  const MODE_SCOPE: RecordScope = { environment: env, connection: 7, model: 'Ticket', variant: 'base' };
  const key = { provider_config_key: 'crm', connection_id: 'c-mode', sync_name: 'tickets', variant: 'base' };

  /** A schedule whose last run saved records and left a checkpoint, then ended. */
  async function withCheckpointAndRecords(runId: string) {
    const { schedule, run } = await runningOn(key, runId);
    const first = await records.reserve(MODE_SCOPE, 2);
    const now = new Date();
    await records.insertNew(MODE_SCOPE, [0, 1].map((n) => ({ external_id: `m-${runId}-${n}`, payload: '{}', hash: `h-${n}`, first_seen_at: now, last_modified_at: now, last_action: 'ADDED' as const, deleted_at: null, pruned_at: null, seq: first + n })));
    await records.reveal(MODE_SCOPE, first + 1);
    expect(await schedules.recordProgress(run, {}, { page: 9 }, now)).toBe(true);
    expect(await schedules.finish(run, { status: 'SUCCESS', results: {}, error: null }, now)).toBe(true);
    return schedule;
  }

  it('full_refresh starts the sync over from no checkpoint, and keeps its records', async () => {
    const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
    vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 7, connection_id, provider_config_key, provider: 'crm' }));
    await vault.flush();
    try {
      const deployments = createDeploymentRepo(connection);
      await deployments.insertNext(env, 'crm', [
        { type: 'sync', name: 'tickets', description: { type: 'sync', name: 'tickets', frequency: 'every hour', models: [{ name: 'Ticket', fields: [{ name: 'id', type: 'string' }] }], webhook_subscriptions: [] }, bundle: 'module.exports = {}' },
      ]);
      const trigger = triggerHandler({ bus, logger, deployments, schedules, records, minFrequencyMs: 60_000, operations: { record: () => undefined } });

      const refreshed = await withCheckpointAndRecords('mode-run-1');
      const before = await records.count(MODE_SCOPE);
      expect(await trigger({ environment_id: env, provider_config_key: 'crm', syncs: ['tickets'], connection_id: 'c-mode', full_resync: false, reset_checkpoint: true })).toEqual({ queued: 1 });
      expect((await schedules.getSchedule(refreshed._id))?.checkpoint ?? null).toBeNull();
      expect(await records.count(MODE_SCOPE)).toBe(before);
    } finally {
      await vault.close();
    }
  });
});

describe('a clear that fails half-way', () => {
  // The vault, played by its own identity, knows connection `c-half` (numeric id 8).
  const scopeOf = (model: string, variant: string): RecordScope => ({ environment: env, connection: 8, model, variant });
  const twoModels = [
    {
      type: 'sync' as const,
      name: 'people',
      description: { type: 'sync' as const, name: 'people', frequency: 'every hour', models: ['Contact', 'Lead'].map((name) => ({ name, fields: [{ name: 'id', type: 'string' }] })), webhook_subscriptions: [] },
      bundle: 'module.exports = {}',
    },
  ];
  async function saved(scope: RecordScope, count: number) {
    const first = await records.reserve(scope, count);
    const now = new Date();
    await records.insertNew(scope, Array.from({ length: count }, (_, n) => ({ external_id: `${scope.model}-${n}`, payload: '{}', hash: `h-${n}`, first_seen_at: now, last_modified_at: now, last_action: 'ADDED' as const, deleted_at: null, pruned_at: null, seq: first + n })));
    await records.reveal(scope, first + count - 1);
  }
  /** The real records, whose clear of `Lead` fails once (a write key held past its wait, say). */
  function failingOnce() {
    let failed = false;
    return {
      ...records,
      clear: async (scope: RecordScope) => {
        if (scope.model === 'Lead' && !failed) {
          failed = true;
          throw new Error('the scope stayed busy');
        }
        return records.clear(scope);
      },
    };
  }

  it('of a full resync leaves no checkpoint behind: the next run fetches everything again rather than resuming past records gone', async () => {
    const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
    vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 8, connection_id, provider_config_key, provider: 'crm' }));
    await vault.flush();
    try {
      const deployments = createDeploymentRepo(connection);
      await deployments.insertNext(env, 'crm-half', twoModels);
      const key = { provider_config_key: 'crm-half', connection_id: 'c-half', sync_name: 'people', variant: 'base' };
      const { schedule, run } = await runningOn(key, 'half-run');
      await saved(scopeOf('Contact', 'base'), 2);
      expect(await schedules.recordProgress(run, {}, { page: 4 }, new Date())).toBe(true);
      expect(await schedules.finish(run, { status: 'SUCCESS', results: {}, error: null }, new Date())).toBe(true);
      const trigger = triggerHandler({ bus, logger, deployments, schedules, records: failingOnce() as never, minFrequencyMs: 60_000, operations: { record: () => undefined } });
      await expect(trigger({ environment_id: env, provider_config_key: 'crm-half', syncs: ['people'], connection_id: 'c-half', full_resync: true })).rejects.toThrow();
      expect((await schedules.getSchedule(schedule._id))?.checkpoint ?? null).toBeNull();
    } finally {
      await vault.close();
    }
  });

  it("of a variant's deletion is finished when the deletion is asked again, though the schedule went the first time", async () => {
    const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
    vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 8, connection_id, provider_config_key, provider: 'crm' }));
    await vault.flush();
    try {
      const deployments = createDeploymentRepo(connection);
      await deployments.insertNext(env, 'crm-variant', twoModels);
      await schedules.ensure(env, { provider_config_key: 'crm-variant', connection_id: 'c-half', sync_name: 'people', variant: 'eu' }, 'every hour', new Date());
      await Promise.all([saved(scopeOf('Contact', 'eu'), 2), saved(scopeOf('Lead', 'eu'), 3)]);
      const request = { environment_id: env, provider_config_key: 'crm-variant', connection_id: 'c-half', sync_name: 'people', variant: 'eu' };
      const deps = { bus, logger, deployments, schedules, minFrequencyMs: 60_000, operations: { record: () => undefined } };
      await expect(deleteVariantHandler({ ...deps, records: failingOnce() as never })(request)).rejects.toThrow();
      expect(await deleteVariantHandler({ ...deps, records })(request)).toEqual({ success: true });
      expect([await records.count(scopeOf('Contact', 'eu')), await records.count(scopeOf('Lead', 'eu'))]).toEqual([0, 0]);
      // Now nothing is left of it: unknown.
      await expect(deleteVariantHandler({ ...deps, records })(request)).rejects.toMatchObject({ code: 'unknown_sync_variant' });
    } finally {
      await vault.close();
    }
  });
});

describe('GET /sync/status for every connection of an integration', () => {
  // It asked the vault for each connection's id, one request after another, though the walk over
  // the integration's connections had just answered them all: thousands of connections meant
  // thousands of round trips, past the gateway's timeout.
  it("names each connection by the id the walk gave, with no request for it alone", async () => {
    const vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
    const ids = new Map(Array.from({ length: 30 }, (_, i) => [`c-status-${i}`, 500 + i]));
    let resolved = 0;
    vault.serve(vaultContracts.integrationConnections, () => ({ connections: [...ids].map(([connection_id, id]) => ({ id, connection_id })), next: null }));
    vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => {
      resolved += 1;
      return { id: ids.get(connection_id) ?? 0, connection_id, provider_config_key, provider: 'crm' };
    });
    await vault.flush();
    try {
      const statusEnv = environmentId('env_status');
      const deployments = createDeploymentRepo(connection);
      await deployments.insertNext(statusEnv, 'crm', [
        { type: 'sync', name: 'tickets', description: { type: 'sync', name: 'tickets', frequency: 'every hour', models: [{ name: 'Ticket', fields: [{ name: 'id', type: 'string' }] }], webhook_subscriptions: [] }, bundle: 'module.exports = {}' },
      ]);
      for (const connectionId of ids.keys()) await schedules.ensure(statusEnv, { provider_config_key: 'crm', connection_id: connectionId, sync_name: 'tickets', variant: 'base' }, 'every hour', new Date());
      // Records of one connection, under its numeric id.
      const saved: RecordScope = { environment: statusEnv, connection: 507, model: 'Ticket', variant: 'base' };
      const first = await records.reserve(saved, 2);
      const now = new Date();
      await records.insertNew(saved, [0, 1].map((n) => ({ external_id: `s-${n}`, payload: '{}', hash: `h-${n}`, first_seen_at: now, last_modified_at: now, last_action: 'ADDED' as const, deleted_at: null, pruned_at: null, seq: first + n })));
      await records.reveal(saved, first + 1);

      const status = statusHandler({ bus, logger, deployments, schedules, records, minFrequencyMs: 60_000, operations: { record: () => undefined } } as unknown as SyncsDeps);
      const answer = await status({ environment_id: statusEnv, provider_config_key: 'crm', syncs: ['tickets'] });
      expect(answer.syncs).toHaveLength(30);
      expect(answer.syncs.find((entry) => entry.connection_id === 'c-status-7')?.recordCount).toEqual({ Ticket: 2 });
      expect(answer.syncs.find((entry) => entry.connection_id === 'c-status-8')?.recordCount).toEqual({ Ticket: 0 });
      expect(resolved).toBe(0);
    } finally {
      await vault.close();
    }
  });
});
