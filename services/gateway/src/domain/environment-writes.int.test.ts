import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { connectMongo } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createEnvironmentRepo, type EnvironmentRepo } from '../db/environment-repo.js';
import { serializedEnvironmentWrites } from './environment-writes.js';
import { createSettingsCipher } from './settings-cipher.js';
import { generateSigningKey } from './signing-keys.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let mongo: TestMongo;
let bus: Bus;
let connection: Connection;
/** Two gateway replicas' repositories: one database, one lock bucket. */
let replicas: EnvironmentRepo[];

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  const locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `environment_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('environment_writes'), logger });
  const cipher = createSettingsCipher([{ version: 'v1', key: randomBytes(32) }]);
  const repo = createEnvironmentRepo(connection, cipher);
  await repo.init();
  replicas = [serializedEnvironmentWrites(repo, locks), serializedEnvironmentWrites(createEnvironmentRepo(connection, cipher), locks)];
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

describe('changes to one environment from two replicas at once', () => {
  it('keep every rotated signing key and the settings changed beside them', async () => {
    const environment = await replicas[0]!.create({ name: `race-${randomBytes(3).toString('hex')}`, account_id: 'acc', signing_key: generateSigningKey(new Date()) });
    const [rotations] = await Promise.all([
      Promise.all(Array.from({ length: 4 }, (_, i) => replicas[i % 2]!.rotateSigningKeys(environment._id, new Date()))),
      replicas[1]!.update(environment._id, { webhook_url: 'https://example.com/hooks' }),
      replicas[0]!.update(environment._id, { variables: [{ name: 'REGION', value: 'eu' }] }),
    ]);
    const stored = (await replicas[0]!.findById(environment._id))!;
    // Every caller was shown a key that signs: each rotation's new key is among those stored.
    const secrets = stored.signing_keys.map((key) => key.secret);
    for (const keys of rotations) expect(secrets).toContain(keys![0]!.secret);
    expect(stored.signing_keys).toHaveLength(5);
    expect(stored).toMatchObject({ webhook_url: 'https://example.com/hooks', variables: [{ name: 'REGION', value: 'eu' }] });
  }, 30_000);
});
