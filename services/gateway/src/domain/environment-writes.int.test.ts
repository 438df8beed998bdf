import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, openKv, WRITE_KEYS, type Bus, type KvLocks } from '@latchkey/bus';
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
let locks: KvLocks;
const v1 = { version: 'v1', key: randomBytes(32) };
const v2 = { version: 'v2', key: randomBytes(32) };

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // Test buckets are no service's: the test server's observer may open them.
  bus = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `environment_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('environment_writes'), logger });
  const cipher = createSettingsCipher([v1]);
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

  // A replica starting in a rolling restart that moves SETTINGS_SEALING_VERSION reseals every
  // environment while the others serve: on FerretDB its rewrite put back the signing keys it had
  // read, so a rotated key the operator was shown never signed; a bootstrap start's mark could
  // likewise put them back.
  it('keep a rotated signing key and the bootstrap mark while a starting replica reseals', async () => {
    const resealing = serializedEnvironmentWrites(createEnvironmentRepo(connection, createSettingsCipher([v1, v2], { sealingVersion: 'v2' })), locks);
    // The serving replicas know v2 already (step one of the rotation) and still seal with v1.
    const serving = [0, 1].map(() => serializedEnvironmentWrites(createEnvironmentRepo(connection, createSettingsCipher([v1, v2], { sealingVersion: 'v1' })), locks));
    const reader = createEnvironmentRepo(connection, createSettingsCipher([v1, v2]));
    for (let round = 0; round < 12; round++) {
      const environments = await Promise.all(
        Array.from({ length: 6 }, (_, i) => serving[0]!.create({ name: `reseal-${round}-${i}-${randomBytes(3).toString('hex')}`, account_id: 'acc', signing_key: generateSigningKey(new Date()) })),
      );
      // Each environment rotated twice in a row by the serving replicas, marked once by the starting one.
      const rotateTwice = async (id: string) => [await serving[0]!.rotateSigningKeys(id, new Date()), await serving[1]!.rotateSigningKeys(id, new Date())];
      const [, rotations] = await Promise.all([
        resealing.sealAtRest(),
        Promise.all(environments.map((environment) => rotateTwice(environment._id))),
        Promise.all(environments.map((environment) => resealing.markBootstrapKey(environment._id, `digest-${round}`))),
      ]);
      for (const [i, environment] of environments.entries()) {
        const stored = (await reader.findById(environment._id))!;
        const shown = rotations[i]!.map((keys) => keys![0]!.secret);
        expect(stored.signing_keys.map((key) => key.secret)).toEqual([shown[1], shown[0], environment.signing_keys[0]!.secret]);
        expect(stored.bootstrap_key_digest).toBe(`digest-${round}`);
      }
    }
  }, 60_000);
});
