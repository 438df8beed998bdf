import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startFerretDb, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createConnectSessionRepo, type ConnectSessionRepo } from './connect-session-repo.js';

// FerretDB, whatever MONGODB_URI says: its updates read and write back the whole document, the
// case a counter on the session document does not survive (MongoDB 7 applies a conditional $inc atomically).
let mongo: TestMongo;
let connection: Connection;
let sessions: ConnectSessionRepo;

beforeAll(async () => {
  mongo = await startFerretDb();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('session_cap'), logger: createLogger({ service: 'test', level: 'error' }) });
  sessions = createConnectSessionRepo(connection);
  await sessions.init();
}, 60_000);

afterAll(async () => {
  await connection?.close();
  await mongo?.dispose();
});

let next = 0;
async function session(expires_at: Date) {
  next += 1;
  const doc = {
    _id: `cs_${next}`,
    digest: `digest-${next}`,
    tags: {},
    allowed_integrations: null,
    integrations_config_defaults: {},
    overrides: {},
    end_user: null,
    organization: null,
    reconnect: null,
    created_at: new Date(),
    expires_at,
  };
  await sessions.insert(environmentId('env_cap'), doc);
  return doc;
}

it('admits exactly the cap of 40 connect flows of one session at once', async () => {
  for (let round = 0; round < 3; round++) {
    const live = await session(new Date(Date.now() + 30 * 60_000));
    const admitted = await Promise.all(Array.from({ length: 40 }, () => sessions.countConnection(live, 20)));
    expect(admitted.filter(Boolean)).toHaveLength(20);
    expect(await sessions.countConnection(live, 20)).toBe(false);
  }
}, 60_000);

it('sweeps the counted connections of an expired session with it, and keeps a live one\'s', async () => {
  const now = new Date();
  const expired = await session(new Date(now.getTime() - 60_000));
  const live = await session(new Date(now.getTime() + 60_000));
  expect(await sessions.countConnection(expired, 2)).toBe(true);
  expect(await sessions.countConnection(live, 2)).toBe(true);
  expect(await sessions.removeExpired(now)).toBe(1);
  const slots = connection.db!.collection<{ _id: string }>('connect_session_slots');
  expect(await slots.findOne({ _id: `${expired.digest}:1` })).toBeNull();
  expect(await slots.findOne({ _id: `${live.digest}:1` })).not.toBeNull();
  expect(await sessions.countConnection(live, 2)).toBe(true);
  expect(await sessions.countConnection(live, 2)).toBe(false);
}, 30_000);
