import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createGivenUpRepo, type GivenUpRepo } from './given-up-repo.js';

let mongo: TestMongo;
let connection: Connection;
let repo: GivenUpRepo;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('gateway_given_up'), logger: createLogger({ service: 'test', silent: true }) });
  repo = createGivenUpRepo(connection);
  await repo.init();
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('the given-up messages, paged back by time', () => {
  it('lists every record once, those given up in one millisecond (a batch) included', async () => {
    const at = new Date().toISOString();
    const older = new Date(Date.now() - 60_000).toISOString();
    const given = (stream_seq: number, when: string) => ({
      service: 'webhook-router',
      stream: 'JOBS',
      durable: 'webhook-router-inbound',
      subject: 'jobs.webhook.inbound',
      stream_seq,
      deliveries: 1,
      reason: 'malformed' as const,
      error: { code: 'invalid_body', message: 'not a webhook' },
      at: when,
    });
    for (const seq of [1, 2, 3]) await repo.record(given(seq, at));
    await repo.record(given(4, older));
    const seen: number[] = [];
    let before: Date | undefined;
    for (let page = 0; page < 10; page++) {
      const records = await repo.list(2, before);
      if (records.length === 0) break;
      seen.push(...records.map((record) => record.stream_seq));
      before = new Date(records.at(-1)!.at);
    }
    expect(seen.sort()).toEqual([1, 2, 3, 4]);
  });
});
