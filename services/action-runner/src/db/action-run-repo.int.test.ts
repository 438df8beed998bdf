import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import type { ActionRunDoc, ActionRunStatus } from './action-run-model.js';
import { createActionRunRepo, type ActionRunRepo } from './action-run-repo.js';

let mongo: TestMongo;
let connection: Connection;
let repo: ActionRunRepo;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('action_runs'), logger: createLogger({ service: 'test', silent: true }) });
  repo = createActionRunRepo(connection);
  await repo.init();
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

const DAY = 24 * 3600 * 1000;

function run(id: string, status: ActionRunStatus, createdDaysAgo: number, completedDaysAgo?: number): ActionRunDoc {
  return {
    _id: id,
    environment_id: 'env_a',
    provider_config_key: 'api',
    connection_id: 'c1',
    action_name: 'echo',
    input_json: null,
    status,
    output_json: status === 'done' ? '{}' : null,
    error: null,
    attempts: status === 'queued' ? 0 : 1,
    created_at: new Date(Date.now() - createdDaysAgo * DAY),
    completed_at: completedDaysAgo === undefined ? null : new Date(Date.now() - completedDaysAgo * DAY),
  };
}

describe("the async action runs' sweep", () => {
  // A run whose job never reached JetStream (the enqueue failed, or the replica died between
  // the insert and the enqueue), or whose job JetStream dropped at its age limit, stays queued:
  // no delivery will ever finish it, so the finished runs' sweep never removed it.
  it('forgets runs that never finished once their job can no longer come, and keeps those that still may', async () => {
    await Promise.all(
      [
        run('old-done', 'done', 9, 9),
        run('recent-done', 'done', 2, 2),
        run('abandoned-queued', 'queued', 20),
        run('abandoned-running', 'running', 20),
        run('recent-queued', 'queued', 1),
        run('recent-running', 'running', 0),
      ].map((doc) => repo.insert(doc)),
    );
    const removed = await repo.removeExpired({ finishedBefore: new Date(Date.now() - 7 * DAY), unfinishedCreatedBefore: new Date(Date.now() - 14 * DAY) });
    expect(removed).toBe(3);
    const left = await Promise.all(['old-done', 'recent-done', 'abandoned-queued', 'abandoned-running', 'recent-queued', 'recent-running'].map((id) => repo.get(environmentId('env_a'), id)));
    expect(left.map((doc) => doc?._id ?? null)).toEqual([null, 'recent-done', null, null, 'recent-queued', 'recent-running']);
  });
});

describe('an async action run delivered twice at once', () => {
  // A replica stalled past the ack wait, or cut off from NATS, while JetStream hands the run to
  // another: both run it, both record an outcome, and a redelivery marks it running. On FerretDB
  // (an update reads and writes back the whole document) both finishes won, each announced its
  // own outcome, and a finished run could read `running` again.
  it('keeps the first outcome, the one every reader sees, and never runs again once finished', async () => {
    const env = environmentId('env_a');
    const outcomes = {
      done: { status: 'done' as const, output_json: '"first"', error: null },
      failed: { status: 'failed' as const, output_json: null, error: { code: 'function_failed', message: 'second' } },
    };
    for (let round = 0; round < 20; round++) {
      const id = `race-${round}`;
      await repo.insert({ ...run(id, 'running', 0), attempts: 1 });
      const [, done, failed] = await Promise.all([repo.markRunning(env, id, 2), repo.finish(env, id, outcomes.done), repo.finish(env, id, outcomes.failed), repo.markRunning(env, id, 3)]);
      expect([done, failed].filter(Boolean)).toHaveLength(1);
      const winner = done ? outcomes.done : outcomes.failed;
      // What each delivery announces is what it reads back after its finish: the winner's outcome.
      const [first, second] = await Promise.all([repo.get(env, id), repo.get(env, id)]);
      for (const read of [first, second]) expect(read).toMatchObject({ ...winner, completed_at: expect.any(Date) });
      // A later delivery finds it finished, and marking it running changes nothing.
      await repo.markRunning(env, id, 4);
      expect(await repo.get(env, id)).toMatchObject({ ...winner, completed_at: first!.completed_at });
      expect(await repo.finish(env, id, outcomes.done)).toBe(false);
      expect(await repo.get(environmentId('env_b'), id)).toBeNull();
    }
  });

  it('are forgotten with their outcome once the result has been kept long enough', async () => {
    const env = environmentId('env_a');
    await repo.insert(run('swept', 'running', 0));
    expect(await repo.finish(env, 'swept', { status: 'done', output_json: '1', error: null })).toBe(true);
    const later = new Date(Date.now() + DAY);
    await repo.removeExpired({ finishedBefore: later, unfinishedCreatedBefore: new Date(0) });
    expect(await repo.get(env, 'swept')).toBeNull();
    expect(await connection.collection('action_run_outcomes').findOne({ _id: 'swept' as never })).toBeNull();
  });
});
