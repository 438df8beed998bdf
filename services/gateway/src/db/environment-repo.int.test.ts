import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { DecryptionError } from '@latchkey/crypto';
import { createLogger } from '@latchkey/logger';
import { connectMongo } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createSettingsCipher } from '../domain/settings-cipher.js';
import { createEnvironmentRepo, type EnvironmentRepo } from './environment-repo.js';

const logger = createLogger({ service: 'test', silent: true });
const v1 = { version: 'v1', key: randomBytes(32) };
const v2 = { version: 'v2', key: randomBytes(32) };

let mongo: TestMongo;
let connection: Connection;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('gateway_settings'), logger });
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

const raw = () => connection.collection('environments');

describe('environment settings at rest', () => {
  it('seals documents an earlier version stored in plaintext, once, at start', async () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const value = `CANARY_${randomBytes(12).toString('hex')}`;
    const now = new Date();
    await raw().insertOne({
      _id: 'env_legacy' as never,
      account_id: 'acc',
      name: 'legacy',
      public_id: 'pub_legacy',
      webhook_url: null,
      webhook_url_secondary: null,
      send_auth_webhooks: false,
      callback_url: null,
      variables: [{ name: 'TOKEN', value }],
      signing_keys: [{ secret, created_at: now, retired_at: null }],
      created_at: now,
      updated_at: now,
    });
    const repo = createEnvironmentRepo(connection, createSettingsCipher([v1]));
    expect(await repo.sealAtRest()).toBe(1);
    expect(await repo.sealAtRest()).toBe(0);
    const stored = JSON.stringify(await raw().findOne({ _id: 'env_legacy' as never }));
    expect(stored).not.toContain(value);
    expect(stored).not.toContain(secret.slice(6));
    const environment = await repo.findById('env_legacy');
    expect(environment?.variables).toEqual([{ name: 'TOKEN', value }]);
    expect(environment?.signing_keys.map((key) => key.secret)).toEqual([secret]);
  });

  it('reseals under a newer key at start, after which the old key may go', async () => {
    const before = createEnvironmentRepo(connection, createSettingsCipher([v1]));
    const environment = await before.create({ name: 'rotating', account_id: 'acc', signing_key: { secret: 'whsec_rotating', created_at: new Date(), retired_at: null } });
    await before.update(environment._id, { variables: [{ name: 'A', value: 'alpha' }] });
    const both = createEnvironmentRepo(connection, createSettingsCipher([v1, v2]));
    expect(await both.sealAtRest()).toBeGreaterThanOrEqual(1);
    const onlyNew = createEnvironmentRepo(connection, createSettingsCipher([v2]));
    expect((await onlyNew.findById(environment._id))?.variables).toEqual([{ name: 'A', value: 'alpha' }]);
    expect((await onlyNew.findById(environment._id))?.signing_keys[0]?.secret).toBe('whsec_rotating');
  });

  it('rotates in two steps across replicas, none of them ever unable to read what another wrote', async () => {
    // Replica A has not been restarted yet: it knows v1 only.
    const a = createEnvironmentRepo(connection, createSettingsCipher([v1]));
    const environment = await a.create({ name: 'rolling', account_id: 'acc', signing_key: { secret: 'whsec_rolling', created_at: new Date(), retired_at: null } });
    await a.update(environment._id, { variables: [{ name: 'A', value: 'alpha' }] });
    const readable = async (repo: EnvironmentRepo) => {
      const found = await repo.findById(environment._id);
      return { variables: found?.variables, secret: found?.signing_keys[0]?.secret };
    };
    const expected = { variables: [{ name: 'A', value: 'alpha' }], secret: 'whsec_rolling' };

    // Step one: replica B restarts knowing v2 but still sealing with v1; its start and its writes keep A reading.
    const b = createEnvironmentRepo(connection, createSettingsCipher([v1, v2], { sealingVersion: 'v1' }));
    await b.sealAtRest();
    await b.update(environment._id, { variables: [{ name: 'A', value: 'alpha' }] });
    expect(await readable(a)).toEqual(expected);

    // Step two, once every replica knows v2: sealing moves to v2 and the start reseals; A, restarted in step one, reads it.
    const aRestarted = createEnvironmentRepo(connection, createSettingsCipher([v1, v2], { sealingVersion: 'v1' }));
    const bSealingV2 = createEnvironmentRepo(connection, createSettingsCipher([v1, v2], { sealingVersion: 'v2' }));
    expect(await bSealingV2.sealAtRest()).toBeGreaterThanOrEqual(1);
    expect(await readable(aRestarted)).toEqual(expected);
    // Then v1 may go.
    expect(await readable(createEnvironmentRepo(connection, createSettingsCipher([v2])))).toEqual(expected);
  });

  it('refuses a sealed value copied into another environment', async () => {
    const repo = createEnvironmentRepo(connection, createSettingsCipher([v2]));
    const a = await repo.create({ name: 'copy-a', account_id: 'acc', signing_key: { secret: 'whsec_a', created_at: new Date(), retired_at: null } });
    const b = await repo.create({ name: 'copy-b', account_id: 'acc', signing_key: { secret: 'whsec_b', created_at: new Date(), retired_at: null } });
    await repo.update(a._id, { variables: [{ name: 'X', value: 'only for a' }] });
    const sealedA = (await raw().findOne({ _id: a._id as never }))?.['variables'];
    await raw().updateOne({ _id: b._id as never }, { $set: { variables: sealedA } });
    await expect(repo.findById(b._id)).rejects.toThrow(DecryptionError);
  });
});
