import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, kvLockKey, openKv, WRITE_KEYS, type Bus, type KvLocks } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { LOG_BLOCK } from '../db/record-model.js';
import { createRecordRepo, type RecordScope, type RecordWrite } from '../db/record-repo.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { serializedRecordWrites, type SerializedRecordRepo } from './record-writes.js';
import { serializedScheduleWrites } from './schedule-writes.js';

const logger = createLogger({ service: 'test', level: 'error' });
const environment = environmentId('env_schedule_writes');
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two scheduler replicas' repositories: one database, one lock bucket. */
let replicas: ScheduleRepo[];
/** The same two replicas' record stores. */
let recordReplicas: SerializedRecordRepo[];
/** The lock bucket both replicas write under. */
let locks: KvLocks;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `schedule_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('schedule_writes'), logger });
  const repo = createScheduleRepo(connection);
  await repo.init();
  replicas = [serializedScheduleWrites(repo, locks), serializedScheduleWrites(createScheduleRepo(connection), locks)];
  const records = createRecordRepo(connection);
  await records.init();
  recordReplicas = [serializedRecordWrites(records, locks), serializedRecordWrites(createRecordRepo(connection), locks)];
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
    await replicas[1]!.beginAttempt(run, new Date());
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

const item = (id: string, seq: number): RecordWrite => {
  const at = new Date();
  return { external_id: id, payload: JSON.stringify({ id }), hash: id, first_seen_at: at, last_modified_at: at, last_action: 'ADDED', deleted_at: null, pruned_at: null, seq };
};

describe('a schedule made through the serialized writes', () => {
  // The wrapper dropped `ensure`'s connection id: every schedule the scheduler made kept none, so
  // a connection deleted and its name taken again passed its schedule, checkpoint and run in
  // flight on to the new connection (connection-deleted.int.test.ts, on the bare repository).
  it('keeps the numeric id of the connection it was made for', async () => {
    const target = { provider_config_key: 'crm', connection_id: 'kept-id', sync_name: 'contacts', variant: 'base' };
    expect(await replicas[0]!.ensure(environment, target, 'every hour', new Date(), 42)).toBe('created');
    expect((await replicas[1]!.get(environment, target))?.connection).toBe(42);
  });

  // `remove` took no key: a claim meeting it could put back the slot it had just read and start
  // a run for a deleted variant or connection, which then wrote records into a cleared scope.
  // The scheduler reads the due schedules, then claims each with a next run from the frequency it
  // read: a frequency change landing in between was undone by the claim, so the schedule ran on
  // the old frequency once more (and its status named the old next run).
  it("keeps the next run a frequency change set, when a claim read the schedule before it", async () => {
    const target = { provider_config_key: 'crm', connection_id: 'retimed', sync_name: 'contacts', variant: 'base' };
    await replicas[0]!.ensure(environment, target, 'every 2 seconds', new Date(), 44);
    const read = (await replicas[0]!.get(environment, target))!;
    const now = new Date();
    const reverted = new Date(now.getTime() + 3_600_000);
    await replicas[1]!.setFrequencyOverride(read._id, 'every hour', reverted);
    const run = await replicas[0]!.claim(read, `run-${randomBytes(4).toString('hex')}`, new Date(now.getTime() + 2_000), now);
    expect(run).not.toBeNull();
    const after = (await replicas[0]!.get(environment, target))!;
    expect({ running: after.running, next: after.next_run_at?.getTime() }).toEqual({ running: run!._id, next: reverted.getTime() });
  });

  // The scheduler, or a trigger, reads a schedule, then claims it: a deletion of its variant or
  // connection landing in between left the claim to make a slot and a run for a schedule no
  // longer there, and the run wrote a whole sync into the cleared scope, which nothing clears.
  it('starts no run for a schedule removed after the claim read it', async () => {
    const target = { provider_config_key: 'crm', connection_id: 'gone', sync_name: 'contacts', variant: 'v1' };
    await replicas[0]!.ensure(environment, target, 'every hour', new Date(), 45);
    const read = (await replicas[0]!.get(environment, target))!;
    await replicas[1]!.remove([read._id]);
    const runId = `run-${randomBytes(4).toString('hex')}`;
    const now = new Date();
    expect(await replicas[0]!.claim(read, runId, new Date(now.getTime() + 3_600_000), now)).toBeNull();
    expect(await replicas[0]!.getRun(environment, runId)).toBeNull();
    expect(await connection.collection('sync_run_slots').countDocuments({ _id: read._id as never })).toBe(0);
  });

  it('is removed only once the write in flight on it has ended', async () => {
    const target = { provider_config_key: 'crm', connection_id: 'removed', sync_name: 'contacts', variant: 'base' };
    await replicas[0]!.ensure(environment, target, 'every hour', new Date(), 43);
    const schedule = (await replicas[0]!.get(environment, target))!;
    const held = (await locks.acquire(kvLockKey('schedule', schedule._id)))!;
    let removed = false;
    const removal = replicas[1]!.remove([schedule._id]).then(() => {
      removed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(removed).toBe(false);
    expect(await replicas[0]!.get(environment, target)).not.toBeNull();
    await locks.release(held);
    await removal;
    expect(await replicas[0]!.get(environment, target)).toBeNull();
  });
});

describe("a full resync's clear on one replica while a write of the scope is in flight on another", () => {
  // A run handed back, or taken over, can still have a write in flight when a trigger's full
  // resync clears the scope elsewhere. The clear set the log's start past the numbers the write
  // had reserved and deleted the log; the write's entries then went in below that start, its
  // records were stored, and every later save found them unchanged: stored, and never listed.
  it('waits for the write, and a save after it lists every record', async () => {
    const scope: RecordScope = { environment: environmentId('env_records'), connection: 1, model: 'Item', variant: 'base' };
    const ids = Array.from({ length: LOG_BLOCK - 1 }, (_, n) => `i${n}`);
    let reserved!: () => void;
    const inFlight = new Promise<void>((resolve) => (reserved = resolve));
    let clearing: Promise<number> | undefined;

    // Replica 0: a page of the run handed back, reserved up to the end of the first log block.
    await recordReplicas[0]!.writing(scope, async () => {
      const first = await recordReplicas[0]!.reserve(scope, ids.length);
      reserved();
      // Replica 1 takes a full resync's trigger now, and clears.
      clearing = inFlight.then(() => recordReplicas[1]!.clear(scope));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await recordReplicas[0]!.insertNew(scope, ids.map((id, offset) => item(id, first + offset)));
    });
    await clearing;

    // The resumed run saves every record: those the clear left out are stored again, the others
    // found unchanged and revealed, as the records handler does.
    await recordReplicas[1]!.writing(scope, async () => {
      const stored = new Set((await recordReplicas[1]!.findByIds(scope, ids)).map((doc) => doc.external_id));
      const absent = ids.filter((id) => !stored.has(id));
      if (absent.length > 0) {
        const first = await recordReplicas[1]!.reserve(scope, absent.length);
        await recordReplicas[1]!.insertNew(scope, absent.map((id, offset) => item(id, first + offset)));
      }
      const found = await recordReplicas[1]!.findByIds(scope, ids);
      if (found.length > 0) await recordReplicas[1]!.reveal(scope, Math.max(...found.map((doc) => doc.seq)));
    });

    const listed = await recordReplicas[0]!.page(scope, { limit: 2 * LOG_BLOCK });
    expect(listed.length).toBe(ids.length);
  }, 30_000);
});
