import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId, type EnvironmentId } from '@latchkey/mongo';
import { startFerretDb, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createKeyring } from '../crypto/keyring.js';
import type { DataKeyDoc } from '../db/data-key-model.js';
import { createDataKeyRepo } from '../db/data-key-repo.js';
import { rotateKeysHandler } from './rotate-keys.js';

const logger = createLogger({ service: 'test', level: 'error' });
const v1 = { version: 'v1', key: randomBytes(32) };
const v2 = { version: 'v2', key: randomBytes(32) };
const v3 = { version: 'v3', key: randomBytes(32) };
const token = { connectionId: 'conn_1', field: 'access_token' };

// FerretDB, whatever MONGODB_URI says: a re-wrap and a retire of one data key at once lose one
// of them there (each reads the document and writes it back whole).
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let replicas: Connection[];
let locks: ReturnType<typeof createKvLocks>;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startFerretDb()]);
  bus = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `write_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  const dbName = uniqueDbName('rotation');
  replicas = await Promise.all([connectMongo({ uri: mongo.uri, dbName, logger }), connectMongo({ uri: mongo.uri, dbName, logger })]);
  await Promise.all(replicas.map((replica) => createDataKeyRepo(replica).init()));
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await replicas?.[0]?.dropDatabase();
  await Promise.all((replicas ?? []).map((replica) => replica.close()));
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

/** One vault replica's rotation, over environments that hold data keys only. */
function rotation(replica: Connection, environments: readonly EnvironmentId[], sealingVersion = 'v2') {
  const keyring = createKeyring({ keks: [v1, v2, v3], dataKeys: createDataKeyRepo(replica), sealingVersion });
  const none = { environments: async () => environments.map(String) };
  return rotateKeysHandler({
    keyring,
    logger,
    locks,
    connections: { ...none, listAll: async () => [], swapCredentials: async () => false },
    integrations: { ...none, list: async () => [], swapField: async () => false },
  } as never);
}

it('leaves every data key under the new KEK when two rotations run at once', async () => {
  for (let round = 0; round < 2; round++) {
    const environments = Array.from({ length: 12 }, () => environmentId(`env_${randomBytes(6).toString('hex')}`));
    const before = createKeyring({ keks: [v1], dataKeys: createDataKeyRepo(replicas[0]!) });
    const blobs = await Promise.all(environments.map((environment) => before.encrypt(environment, token, `secret-${environment}`)));

    // An operator's retry after the gateway timed out, while the first run goes on on another replica.
    const runs = await Promise.allSettled(replicas.map((replica) => rotation(replica, environments)({ data_keys: true })));
    for (const run of runs) {
      if (run.status === 'fulfilled') expect(run.value.failed).toEqual([]);
      else expect(run.reason).toMatchObject({ code: 'service_unavailable' });
    }
    expect(runs.some((run) => run.status === 'fulfilled')).toBe(true);

    const stored = await replicas[0]!.db!.collection<DataKeyDoc>('data_keys').find({ environment_id: { $in: environments } }).toArray();
    expect(stored.filter((doc) => doc.kek_version !== 'v2').map((doc) => `${doc.environment_id} v${doc.version}`)).toEqual([]);
    const after = createKeyring({ keks: [v2], dataKeys: createDataKeyRepo(replicas[1]!) });
    for (const [index, environment] of environments.entries()) expect(await after.decrypt(environment, token, blobs[index]!)).toBe(`secret-${environment}`);
  }
}, 120_000);

// During a rolling update one replica still seals with v2 while the operator rotates to v3 on
// another: a report that says nothing failed must mean every key is under v3 (v2 may then go).
it('reports every data key it leaves under another KEK as failed', async () => {
  for (let round = 0; round < 3; round++) {
    const environments = Array.from({ length: 12 }, () => environmentId(`env_${randomBytes(6).toString('hex')}`));
    const before = createKeyring({ keks: [v1], dataKeys: createDataKeyRepo(replicas[0]!) });
    await Promise.all(environments.map((environment) => before.encrypt(environment, token, `secret-${environment}`)));

    const sealing = ['v2', 'v3'];
    const runs = await Promise.allSettled(replicas.map((replica, index) => rotation(replica, environments, sealing[index])({ data_keys: false })));
    const stored = await replicas[0]!.db!.collection<DataKeyDoc>('data_keys').find({}).toArray();
    for (const [index, run] of runs.entries()) {
      if (run.status === 'rejected') {
        expect(run.reason).toMatchObject({ code: 'service_unavailable' });
        continue;
      }
      const elsewhere = stored.filter((doc) => doc.kek_version !== sealing[index]).map((doc) => doc._id);
      expect(run.value.failed.map((failure) => failure.id).sort()).toEqual(elsewhere.sort());
    }
    // Whichever ran last: every key under v3, for the next round to move all back to one KEK.
    await rotation(replicas[1]!, environments, 'v3')({ data_keys: false });
  }
}, 120_000);
