import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { LOG_BLOCK } from '../db/record-model.js';
import { createRecordRepo, type RecordScope, type RecordWrite } from '../db/record-repo.js';
import { serializedRecordWrites, type SerializedRecordRepo } from './record-writes.js';

const logger = createLogger({ service: 'test', level: 'error' });
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two scheduler replicas' record stores: one database, one lock bucket. */
let replicas: SerializedRecordRepo[];

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  const locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `record_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('record_writes'), logger });
  const repo = createRecordRepo(connection);
  await repo.init();
  replicas = [serializedRecordWrites(repo, locks), serializedRecordWrites(createRecordRepo(connection), locks)];
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

const item = (id: string, seq: number): RecordWrite => {
  const at = new Date();
  return { external_id: id, payload: JSON.stringify({ id }), hash: id, first_seen_at: at, last_modified_at: at, last_action: 'ADDED', deleted_at: null, pruned_at: null, seq };
};

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
    await replicas[0]!.writing(scope, async () => {
      const first = await replicas[0]!.reserve(scope, ids.length);
      reserved();
      // Replica 1 takes a full resync's trigger now, and clears.
      clearing = inFlight.then(() => replicas[1]!.clear(scope));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await replicas[0]!.insertNew(scope, ids.map((id, offset) => item(id, first + offset)));
    });
    await clearing;

    // The resumed run saves every record: those the clear left out are stored again, the others
    // found unchanged and revealed, as the records handler does.
    await replicas[1]!.writing(scope, async () => {
      const stored = new Set((await replicas[1]!.findByIds(scope, ids)).map((doc) => doc.external_id));
      const absent = ids.filter((id) => !stored.has(id));
      if (absent.length > 0) {
        const first = await replicas[1]!.reserve(scope, absent.length);
        await replicas[1]!.insertNew(scope, absent.map((id, offset) => item(id, first + offset)));
      }
      const found = await replicas[1]!.findByIds(scope, ids);
      if (found.length > 0) await replicas[1]!.reveal(scope, Math.max(...found.map((doc) => doc.seq)));
    });

    const listed = await replicas[0]!.page(scope, { limit: 2 * LOG_BLOCK });
    expect(listed.length).toBe(ids.length);
  }, 30_000);
});
