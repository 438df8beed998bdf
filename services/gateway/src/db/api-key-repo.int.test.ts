import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { apiKeyDigestModel, apiKeyModel, type ApiKeyDigestDoc, type ApiKeyDoc } from './api-key-model.js';
import { apiKeyQueries, createApiKeyRepo, type ApiKeyRepo } from './api-key-repo.js';

let mongo: TestMongo;
let connection: Connection;
let repo: ApiKeyRepo;

const environment = environmentId('env_keys');
const key = (i: number) => ({
  _id: `key_${i}`,
  account_id: 'acc',
  display_name: `key ${i}`,
  scopes: 'full_access' as const,
  digest: `digest_${i}`,
  hint: 'lk_xxxx',
  created_at: new Date(),
  last_used_at: null,
});

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('api_keys'), logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createApiKeyRepo(connection);
  await repo.init();
  // Enough keys that a scan and a lookup differ in the plan.
  for (let i = 0; i < 300; i += 1) await repo.insert(environment, key(i));
}, 60_000);

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('API-key authentication', () => {
  it('is two _id lookups, each an index lookup', async () => {
    const digests = apiKeyDigestModel(connection).collection as unknown as driver.Collection<ApiKeyDigestDoc>;
    const keys = apiKeyModel(connection).collection as unknown as driver.Collection<ApiKeyDoc>;
    expect(await explainUntilIndexed(() => digests.find(apiKeyQueries.digest('digest_150')))).toMatchObject({ indexed: true });
    expect(await explainUntilIndexed(() => keys.find(apiKeyQueries.key('key_150')))).toMatchObject({ indexed: true });
    expect(await repo.findByDigest('digest_150')).toMatchObject({ _id: 'key_150', environment_id: environment });
    expect(await repo.findByDigest('digest_unknown')).toBeNull();
  }, 30_000);

  it('records the last use by _id (the lookup explained above), never moving it back', async () => {
    const keys = apiKeyModel(connection).collection as unknown as driver.Collection<ApiKeyDoc>;
    const later = new Date('2026-03-02T10:00:00Z');
    await repo.touchLastUsed('key_151', later);
    expect((await keys.findOne(apiKeyQueries.key('key_151')))!.last_used_at).toEqual(later);
    // Another replica's older report changes nothing.
    await repo.touchLastUsed('key_151', new Date('2026-03-01T10:00:00Z'));
    expect((await keys.findOne(apiKeyQueries.key('key_151')))!.last_used_at).toEqual(later);
    const latest = new Date('2026-03-03T10:00:00Z');
    await repo.touchLastUsed('key_151', latest);
    expect((await keys.findOne(apiKeyQueries.key('key_151')))!.last_used_at).toEqual(latest);
  });

  it('finds keys stored before the digest entries existed, once two replicas have started together', async () => {
    const legacy = { ...key(900), environment_id: environment };
    await apiKeyModel(connection).collection.insertOne(legacy as never);
    expect(await repo.findByDigest('digest_900')).toBeNull();
    const [first, second] = await Promise.all([repo.indexDigests(), createApiKeyRepo(connection).indexDigests()]);
    // Only the missing entry is written (by one replica or both, racing).
    expect(first + second).toBeGreaterThanOrEqual(1);
    expect(first + second).toBeLessThanOrEqual(2);
    expect(await repo.findByDigest('digest_900')).toMatchObject({ _id: 'key_900' });
    expect(await repo.findByDigest('digest_7')).toMatchObject({ _id: 'key_7' });
    // Idempotent: a later start changes nothing.
    expect(await repo.indexDigests()).toBe(0);
    expect(await apiKeyDigestModel(connection).countDocuments()).toBe(301);
  }, 30_000);

  it('a deleted key is found no more, and its digest can be issued again', async () => {
    await repo.delete(environment, { _id: 'key_12', digest: 'digest_12' });
    expect(await repo.findByDigest('digest_12')).toBeNull();
    await repo.insert(environment, { ...key(12), _id: 'key_12b' });
    expect(await repo.findByDigest('digest_12')).toMatchObject({ _id: 'key_12b' });
  }, 30_000);

  it('refuses a second key with the same digest, and leaves the first one found', async () => {
    await expect(repo.insert(environment, { ...key(20), _id: 'key_20b' })).rejects.toThrow();
    expect(await repo.findByDigest('digest_20')).toMatchObject({ _id: 'key_20' });
  }, 30_000);
});
