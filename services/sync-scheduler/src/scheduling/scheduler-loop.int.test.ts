import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createBus, openKv, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { eventually, explainUntilIndexed, startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { scheduleModel, type ScheduleDoc } from '../db/schedule-model.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { createDueSchedules } from './due-schedules.js';
import { createLease, type LeaseEntry } from './lease.js';
import { startSchedulerLoop } from './scheduler-loop.js';

const logger = createLogger({ service: 'test', level: 'error' });
let nats: TestNats;
let mongo: TestMongo;
let connection: Connection;
let schedules: ScheduleRepo;
const buses: Bus[] = [];
const loops: Array<{ stop(): Promise<void> }> = [];

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('scheduler'), logger });
  schedules = createScheduleRepo(connection);
  await schedules.init();
});

afterAll(async () => {
  await Promise.all(loops.map((loop) => loop.stop().catch(() => undefined)));
  await Promise.all(buses.map((bus) => bus.drain().catch(() => undefined)));
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

const DUE: ScheduleDoc = {
  _id: 'due-schedule',
  environment_id: 'env_a',
  provider_config_key: 'crm',
  connection_id: 'c1',
  sync_name: 'contacts',
  variant: 'base',
  frequency: 'every hour',
  frequency_override: null,
  paused: false,
  running: null,
  next_run_at: new Date(0),
  last_status: null,
  last_finished_at: null,
  last_results: {},
  last_error: null,
  checkpoint: null,
  created_at: new Date(0),
};

/** A scheduler replica on its own NATS connection: it counts the runs it would queue. */
async function replica(bucket: string, name: string, leaseMs: number, dueMs = 0) {
  // Test buckets are no service's: the test server's observer may open them. The services' 5 s
  // deadline: a renewal that runs out stops the holder leading, and 2 s was a bet on a loaded machine.
  const bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  buses.push(bus);
  const lease = createLease(await openKv<LeaseEntry>(bus, { name: bucket, ttlMs: leaseMs }), 'leader', name);
  const queued: number[] = [];
  const loop = startSchedulerLoop({
    logger,
    lease,
    tickMs: 100,
    // `dueMs`: a full read of a large collection, or a backlog, outlasting the lease.
    due: async () => (dueMs > 0 && (await sleep(dueMs)), [DUE]),
    startRun: async () => {
      queued.push(Date.now());
      return true;
    },
  });
  loops.push(loop);
  return { bus, lease, loop, queued };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > timeoutMs) throw new Error('timed out');
    await sleep(20);
  }
  return Date.now() - started;
}

describe('the scheduler lease', () => {
  it('lets exactly one replica schedule; when it dies, another takes over within the lease TTL', async () => {
    const a = await replica('lease_crash', 'a', 2000);
    // How soon the first holder leads is not what is checked: 2 s was a bet on a loaded machine.
    await until(() => a.lease.holding(), 10_000);
    const b = await replica('lease_crash', 'b', 2000);
    await sleep(600);
    expect(b.lease.holding()).toBe(false);
    expect(b.queued).toHaveLength(0);
    expect(a.queued.length).toBeGreaterThan(0);

    // A dies without a word: its NATS connection is gone, so it can neither renew nor release.
    await a.bus.close();
    const diedAt = Date.now();
    const tookOverIn = await until(() => b.lease.holding() && b.queued.length > 0, 15_000);
    // The TTL, with room for a loaded machine's stalls (a second was not enough): an entry that
    // never expired would leave B waiting for ever.
    expect(tookOverIn).toBeLessThan(2000 + 3000);
    expect(b.queued[0]!).toBeGreaterThanOrEqual(diedAt);
    expect(a.lease.holding()).toBe(false);
  });

  it('is kept by a holder whose tick outlasts it, and no other replica schedules meanwhile', async () => {
    // A 3 s lease under a 7 s tick: with 1 s, a loaded machine stalling the renewals (every
    // 100 ms) for a second lets the lease expire under its holder, which is not what is checked.
    const a = await replica('lease_long_tick', 'a', 3000, 7000);
    await until(() => a.lease.holding(), 10_000);
    const b = await replica('lease_long_tick', 'b', 3000);
    let bLed = false;
    const watching = setInterval(() => (bLed ||= b.lease.holding()), 20);
    await sleep(10_000);
    clearInterval(watching);
    expect(bLed).toBe(false);
    expect(b.queued).toHaveLength(0);
    expect(a.lease.holding()).toBe(true);
  }, 40_000);

  it('is handed over at once when its holder shuts down', async () => {
    const a = await replica('lease_handover', 'a', 30_000);
    await until(() => a.lease.holding(), 10_000);
    const b = await replica('lease_handover', 'b', 30_000);
    await sleep(300);
    expect(b.lease.holding()).toBe(false);
    await a.loop.stop();
    // Far sooner than the 30 s TTL: the key was deleted on the way out. (A third of it, not a
    // second: a loaded CI machine can stall the test's process for that long.)
    expect(await until(() => b.lease.holding(), 15_000)).toBeLessThan(10_000);
  });

  it('carries what the holder\'s last tick did, for the operator route', async () => {
    const a = await replica('lease_tick', 'a', 30_000);
    const kv = await openKv<LeaseEntry>(a.bus, { name: 'lease_tick', ttlMs: 30_000 });
    const tick = await eventually(async () => {
      const entry = await kv.get('leader');
      return entry?.value.last_tick ? entry.value : undefined;
    }, 5000, 'a tick in the lease');
    expect(tick.owner).toBe('a');
    expect(tick.last_tick).toMatchObject({ read: 1, queued: 1 });
    expect(tick.last_tick!.duration_ms).toBeGreaterThanOrEqual(tick.last_tick!.due_query_ms);
    expect(Date.parse(tick.last_tick!.at)).not.toBeNaN();
  });
});

describe('run claims', () => {
  it('never start two runs of one schedule at once, and free it when the run finishes', async () => {
    const env = environmentId('env_claims');
    const target = { provider_config_key: 'crm', connection_id: 'c1', sync_name: 'contacts', variant: 'base' };
    await schedules.ensure(env, target, 'every hour', new Date(0));
    const schedule = (await schedules.get(env, target))!;
    const now = new Date();
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => schedules.claim(schedule, `run-${i}`, new Date(now.getTime() + 3600_000), now)));
    const won = claims.filter((run) => run !== null);
    expect(won).toHaveLength(1);
    expect((await schedules.get(env, target))!.running).toBe(won[0]!._id);
    expect(await schedules.claim(schedule, 'run-late', now, now)).toBeNull();

    expect(await schedules.finish(won[0]!, { status: 'SUCCESS', results: { Contact: { added: 1, updated: 0, deleted: 0 } }, error: null }, new Date())).toBe(true);
    // A second report of the same run changes nothing.
    expect(await schedules.finish(won[0]!, { status: 'ERROR', results: {}, error: { code: 'x', message: 'y' } }, new Date())).toBe(false);
    const after = (await schedules.get(env, target))!;
    expect(after).toMatchObject({ running: null, last_status: 'SUCCESS', last_results: { Contact: { added: 1, updated: 0, deleted: 0 } } });
    expect(await schedules.claim(after, 'run-next', now, now)).not.toBeNull();
  });

  it('take over a schedule whose run never reported back, and end that run', async () => {
    const env = environmentId('env_stale');
    const target = { provider_config_key: 'crm', connection_id: 'c1', sync_name: 'contacts', variant: 'base' };
    await schedules.ensure(env, target, 'every hour', new Date(0));
    const schedule = (await schedules.get(env, target))!;
    const then = new Date(Date.now() - 2 * 3600_000);
    const lost = (await schedules.claim(schedule, 'run-lost', then, then))!;
    expect(lost).not.toBeNull();
    const now = new Date();
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => schedules.claim(schedule, `taker-${i}`, now, now)));
    expect(claims.filter((run) => run !== null)).toHaveLength(1);
    expect(await schedules.getRun(env, 'run-lost')).toMatchObject({ status: 'ERROR', error: { code: 'sync_run_abandoned' } });
  });
});

describe('due schedules', () => {
  it('come from the index, read again by _id once heard of: an idle tick reads nothing, writes are heard', async () => {
    const env = environmentId('env_due');
    const reads = { all: 0, one: 0 };
    // The service broadcasts the repo's changes; here they go straight to the index.
    let heard: (ids: readonly string[]) => void = () => undefined;
    const repo = createScheduleRepo(connection, { onChange: (ids) => heard(ids) });
    const due = createDueSchedules({
      logger,
      all: () => (reads.all++, repo.all()),
      // Counted once answered: the index holds what was read by the time a check sees the count.
      one: async (id) => {
        const doc = await repo.getSchedule(id);
        reads.one++;
        return doc;
      },
      rescanMs: 3_600_000,
      overdueRetryMs: 60_000,
    });
    heard = (ids) => due.changed(ids);
    const target = (connection_id: string) => ({ provider_config_key: 'crm', connection_id, sync_name: 'contacts', variant: 'base' });
    const now = new Date();
    await repo.ensure(env, target('d1'), 'every hour', new Date(now.getTime() - 1000));
    await repo.ensure(env, target('d2'), 'every hour', new Date(now.getTime() - 2000));
    await repo.ensure(env, target('later'), 'every hour', new Date(now.getTime() + 3_600_000));

    const first = await due.due(now, 500);
    expect(first.filter((doc) => doc.environment_id === env).map((doc) => doc.connection_id)).toEqual(['d2', 'd1']);
    // Just read whole: the first tick reads none of them again.
    expect(reads).toEqual({ all: 1, one: 0 });
    for (const doc of first) await repo.claim(doc, `run-${doc._id}`, new Date(now.getTime() + 3_600_000), now);
    // The claims' announcements are read back; then a tick finds nothing and reads nothing.
    await eventually(() => (reads.one >= first.length ? true : undefined), 5000, 'the claims heard');
    const before = reads.one;
    expect(await due.due(new Date(), 500)).toEqual([]);
    expect(reads.one).toBe(before);

    // Another replica moves a schedule to now: heard, read by _id, due at the next tick.
    const later = (await repo.get(env, target('later')))!;
    await repo.setFrequencyOverride(later._id, 'every minute', new Date(Date.now() - 1));
    const moved = await eventually(async () => {
      const found = await due.due(new Date(), 500);
      return found.length > 0 ? found : undefined;
    }, 5000, 'the moved schedule');
    expect(moved.map((doc) => doc.connection_id)).toEqual(['later']);
    expect(reads.all).toBe(1);

    // Each read again is an `_id` lookup: an index lookup on every backend.
    const collection = scheduleModel(connection).collection;
    expect(await explainUntilIndexed(() => collection.find({ _id: later._id } as never))).toMatchObject({ indexed: true });
  }, 30_000);

  it('hand out again, at the next tick, the schedules a tick took and could not read', async () => {
    const env = environmentId('env_due_blip');
    const repo = createScheduleRepo(connection);
    let failNext = false;
    const due = createDueSchedules({
      logger,
      all: () => repo.all(),
      // A database blip on one read by _id.
      one: async (id) => {
        if (failNext) {
          failNext = false;
          throw new Error('connection reset');
        }
        return repo.getSchedule(id);
      },
      rescanMs: 3_600_000,
      overdueRetryMs: 60_000,
    });
    const now = new Date();
    for (const name of ['b1', 'b2', 'b3']) await repo.ensure(env, { provider_config_key: 'crm', connection_id: name, sync_name: 'contacts', variant: 'base' }, 'every hour', new Date(now.getTime() - 1000));
    const mine = (docs: Array<{ environment_id: string }>) => docs.filter((doc) => doc.environment_id === env).length;
    // The first tick reads them whole; left unclaimed, each later tick reads them again by _id.
    expect(mine(await due.due(now, 500))).toBe(3);
    failNext = true;
    await expect(due.due(new Date(), 500)).rejects.toThrow('connection reset');
    expect(mine(await due.due(new Date(), 500))).toBe(3);
  });

  it('read what a burst of announcements names 32 at a time, leaving the tick its connections', async () => {
    // bench-scale: 10,000 schedules announced in 10 messages were read 32 at a time per message
    // (320 lookups at once, more than the driver's pool of 100), and the tick's own reads and
    // writes queued behind them: 3 s per run queued, against 30 ms on the tick before.
    const env = environmentId('env_burst');
    const repo = createScheduleRepo(connection);
    const target = (connection_id: string) => ({ provider_config_key: 'crm', connection_id, sync_name: 'contacts', variant: 'base' });
    await repo.ensure(env, target('burst-due'), 'every hour', new Date(Date.now() - 1000));
    const reading = { now: 0, most: 0, done: 0 };
    const due = createDueSchedules({
      logger,
      all: () => repo.all(),
      one: async (id) => {
        reading.most = Math.max(reading.most, ++reading.now);
        try {
          return await repo.getSchedule(id);
        } finally {
          reading.now--;
          reading.done++;
        }
      },
      rescanMs: 3_600_000,
      overdueRetryMs: 60_000,
    });
    // Built, and the due schedule taken: the index holds the rest.
    await due.due(new Date(), 500);
    const ids = Array.from({ length: 2000 }, (_, i) => `burst-${i}`);
    for (let start = 0; start < ids.length; start += 200) due.changed(ids.slice(start, start + 200));
    await eventually(() => (reading.done >= ids.length ? true : undefined), 60_000, 'the announced schedules read');
    expect(reading.most).toBeLessThanOrEqual(32);
    // Announced twice while waiting: read once more at most, not once per announcement.
    reading.done = 0;
    for (let i = 0; i < 5; i++) due.changed(ids.slice(0, 100));
    await eventually(() => (reading.done >= 100 ? true : undefined), 10_000, 'the repeated announcements read');
    await sleep(500);
    await eventually(() => (reading.now === 0 ? true : undefined), 10_000, 'the reads over');
    expect(reading.done).toBeLessThanOrEqual(200);
  }, 90_000);
});

describe('a claim lost before its run was queued', () => {
  // Issue 20: the replica that claimed a schedule died before queueing its run. Nothing but a
  // trigger ever claimed a schedule shown running, so one run only by the scheduler stayed
  // stuck for good; now the loop claims it again once it is overdue, and the claim decides.
  it('is taken back by the scheduler loop alone, while a run that reports progress keeps its schedule', async () => {
    const env = environmentId('env_lost_claim');
    const UNSTARTED_MS = 400;
    let heard: (ids: readonly string[]) => void = () => undefined;
    const repo = createScheduleRepo(connection, { unstartedRunMs: UNSTARTED_MS, onChange: (ids) => heard(ids) });
    const due = createDueSchedules({ logger, all: () => repo.all(), one: (id) => repo.getSchedule(id), rescanMs: 3_600_000, overdueRetryMs: 100 });
    heard = (ids) => due.changed(ids);
    const target = (connection_id: string) => ({ provider_config_key: 'crm', connection_id, sync_name: 'contacts', variant: 'base' });
    const then = new Date();
    for (const id of ['lost', 'alive']) await repo.ensure(env, target(id), 'every hour', then);
    // Both claimed with their next run 200 ms on: 'lost' is never queued (its claimer died),
    // 'alive' starts and keeps reporting, as a long sync does.
    const claimed = async (id: string) => repo.claim((await repo.get(env, target(id)))!, `lost-claim-${id}`, new Date(then.getTime() + 200), then);
    const lost = (await claimed('lost'))!;
    const alive = (await claimed('alive'))!;
    await repo.beginAttempt(alive, new Date());
    const reporting = setInterval(() => void repo.recordProgress(alive, {}, undefined, new Date()), 100);

    const bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
    buses.push(bus);
    const lease = createLease(await openKv<LeaseEntry>(bus, { name: 'lease_lost_claim', ttlMs: 5000 }), 'leader', 'a');
    const started: string[] = [];
    const loop = startSchedulerLoop({
      logger,
      lease,
      tickMs: 50,
      due: (now, limit) => due.due(now, limit),
      startRun: async (schedule, now) => {
        // The collection holds the other tests' schedules too: this loop runs only its own.
        if (schedule.environment_id !== env) return false;
        const run = await repo.claim(schedule, `retaken-${schedule.connection_id}-${started.length}`, new Date(now.getTime() + 3_600_000), now);
        if (run) started.push(schedule.connection_id);
        return run !== null;
      },
    });
    loops.push(loop);
    try {
      await eventually(() => (started.includes('lost') ? true : undefined), 10_000, 'the lost claim taken back');
      expect(await repo.getRun(env, lost._id)).toMatchObject({ status: 'ERROR', error: { code: 'sync_run_abandoned' } });
      // Well past the unstarted limit, the reporting run still holds its schedule.
      await sleep(3 * UNSTARTED_MS);
      expect(started).toEqual(['lost']);
      expect(await repo.getRun(env, alive._id)).toMatchObject({ status: 'RUNNING' });
    } finally {
      clearInterval(reporting);
      await loop.stop();
    }
  }, 30_000);
});
