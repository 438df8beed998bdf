import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { z } from 'zod';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import type { DataKeyDoc } from '../db/data-key-model.js';
import { createDataKeyRepo, type DataKeyRepo } from '../db/data-key-repo.js';
import { DecryptionError } from './aead.js';
import { unwrapDataKey } from './kek.js';
import { createKeyring } from './keyring.js';

jest.setTimeout(30_000);

const logger = createLogger({ service: 'test', silent: true });
const v1 = { version: 'v1', key: randomBytes(32) };
const v2 = { version: 'v2', key: randomBytes(32) };
const SECRET = 'sk_live_do-not-store-me-in-clear';
const token = { connectionId: 'conn_1', field: 'access_token' };

let mongo: TestMongo;
// Two connections to one database stand for two replicas of the vault.
let replicaA: Connection;
let replicaB: Connection;
let repoA: DataKeyRepo;
let repoB: DataKeyRepo;

const newEnvironment = () => environmentId(`env_${randomBytes(6).toString('hex')}`);

async function storedDataKeys(environment: string): Promise<DataKeyDoc[]> {
  if (!replicaA.db) throw new Error('not connected');
  return replicaA.db.collection<DataKeyDoc>('data_keys').find({ environment_id: environment }).sort({ version: 1 }).toArray();
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

beforeAll(async () => {
  mongo = await startMongo();
});

afterAll(async () => {
  await mongo?.dispose();
});

// A database per test: KEK rotation spans every environment, so tests must not share keys.
beforeEach(async () => {
  const dbName = uniqueDbName('vault_keys');
  [replicaA, replicaB] = await Promise.all([
    connectMongo({ uri: mongo.uri, dbName, logger }),
    connectMongo({ uri: mongo.uri, dbName, logger }),
  ]);
  repoA = createDataKeyRepo(replicaA);
  repoB = createDataKeyRepo(replicaB);
  await Promise.all([repoA.init(), repoB.init()]);
});

afterEach(async () => {
  await replicaA.dropDatabase();
  await Promise.all([replicaA.close(), replicaB.close()]);
});

describe('keyring on a MongoDB-wire server', () => {
  it('round-trips, with a different ciphertext every time, and stores neither plaintext nor raw key', async () => {
    const keyring = createKeyring({ keks: [v1], dataKeys: repoA });
    const environment = newEnvironment();

    const first = await keyring.encrypt(environment, token, SECRET);
    const second = await keyring.encrypt(environment, token, SECRET);
    expect(first).toMatch(/^lk1\.1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(second).not.toBe(first);
    expect(await keyring.decrypt(environment, token, first)).toBe(SECRET);
    expect(await keyring.decrypt(environment, token, second)).toBe(SECRET);

    const docs = await storedDataKeys(environment);
    expect(docs).toHaveLength(1);
    const [doc] = docs;
    if (!doc) throw new Error('no data key');
    expect(doc).toMatchObject({ environment_id: environment, version: 1, kek_version: 'v1', retired_at: null });
    const rawKey = unwrapDataKey(v1, environment, 1, doc.wrapped);
    const stored = JSON.stringify(docs);
    const encodings = (bytes: Buffer) => [bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')];
    for (const text of [stored, first, second]) {
      expect(text).not.toContain(SECRET);
      for (const encoded of [...encodings(Buffer.from(SECRET)), ...encodings(rawKey), ...encodings(v1.key)]) {
        expect(text).not.toContain(encoded);
      }
    }
    expect(Buffer.from(doc.wrapped, 'base64').includes(rawKey)).toBe(false);
  });

  it('refuses a blob in another environment, connection, integration or field, or when tampered', async () => {
    const keyring = createKeyring({ keks: [v1], dataKeys: repoA });
    const environment = newEnvironment();
    const other = newEnvironment();
    await keyring.encrypt(other, token, 'other environment has a data key v1 too');
    const blob = await keyring.encrypt(environment, token, SECRET);

    await expect(keyring.decrypt(other, token, blob)).rejects.toThrow(DecryptionError);
    await expect(keyring.decrypt(newEnvironment(), token, blob)).rejects.toThrow(DecryptionError);
    await expect(keyring.decrypt(environment, { ...token, connectionId: 'conn_2' }, blob)).rejects.toThrow(DecryptionError);
    await expect(keyring.decrypt(environment, { ...token, field: 'refresh_token' }, blob)).rejects.toThrow(DecryptionError);
    await expect(keyring.decrypt(environment, { ...token, integrationId: 'int_1' }, blob)).rejects.toThrow(DecryptionError);

    const parts = blob.split('.');
    const flipMiddle = (part: string) => {
      const at = Math.floor(part.length / 2);
      return `${part.slice(0, at)}${part[at] === 'A' ? 'B' : 'A'}${part.slice(at + 1)}`;
    };
    const tamper = (index: number) => parts.map((part, at) => (at === index ? flipMiddle(part) : part)).join('.');
    for (const tampered of [tamper(2), tamper(3), tamper(4), blob.replace(/^lk1\.1\./, 'lk1.2.'), blob.slice(0, -4)]) {
      await expect(keyring.decrypt(environment, token, tampered)).rejects.toThrow(DecryptionError);
    }
    expect(await keyring.decrypt(environment, token, blob)).toBe(SECRET);
  });

  it('reads the database only on first use; later encrypts and decrypts are served from memory', async () => {
    let reads = 0;
    const keyring = createKeyring({
      keks: [v1],
      dataKeys: {
        ...repoA,
        findActive: (environment) => ((reads += 1), repoA.findActive(environment)),
        findLatest: (environment) => ((reads += 1), repoA.findLatest(environment)),
        findByVersion: (environment, version) => ((reads += 1), repoA.findByVersion(environment, version)),
      },
    });
    const environment = newEnvironment();
    const blob = await keyring.encrypt(environment, token, SECRET);
    const afterFirstUse = reads;
    for (let i = 0; i < 5; i += 1) {
      await keyring.decrypt(environment, token, await keyring.encrypt(environment, token, SECRET));
    }
    expect(await keyring.decrypt(environment, token, blob)).toBe(SECRET);
    expect(reads).toBe(afterFirstUse);
  });

  it('rotates the KEK: re-wraps every data key, after which the old KEK can be dropped', async () => {
    const environments = [newEnvironment(), newEnvironment(), newEnvironment()];
    const before = createKeyring({ keks: [v1], dataKeys: repoA });
    const blobs = await Promise.all(environments.map((environment) => before.encrypt(environment, token, `${SECRET}-${environment}`)));

    const during = createKeyring({ keks: [v1, v2], dataKeys: repoA });
    // Writes during rotation still go to the existing data keys.
    const writtenDuring = await during.encrypt(environments[0]!, token, SECRET);
    expect(await during.rotate()).toEqual({ rewrapped: 3, unchanged: 0, failed: [] });
    expect(await collect(repoA.listWrappedWith('v1'))).toEqual([]);
    expect(await during.rotate()).toEqual({ rewrapped: 0, unchanged: 3, failed: [] });

    const after = createKeyring({ keks: [v2], dataKeys: repoB });
    for (const [index, environment] of environments.entries()) {
      expect(await after.decrypt(environment, token, blobs[index]!)).toBe(`${SECRET}-${environment}`);
    }
    expect(await after.decrypt(environments[0]!, token, writtenDuring)).toBe(SECRET);

    // A replica still configured with only the old KEK says which KEK it lacks.
    const stale = createKeyring({ keks: [v1], dataKeys: repoB });
    await expect(stale.decrypt(environments[0]!, token, blobs[0]!)).rejects.toThrow(/wrapped with KEK v2/);
    // Same version name, different material: named as a key problem, not as a bad credential.
    const swapped = createKeyring({ keks: [{ version: 'v2', key: randomBytes(32) }], dataKeys: repoB });
    await expect(swapped.decrypt(environments[0]!, token, blobs[0]!)).rejects.toThrow(/does not unwrap under KEK v2/);
    const staleReport = await stale.rotate();
    expect(staleReport.rewrapped).toBe(0);
    expect(staleReport.failed.map((failure) => failure.reason)).toEqual(Array(3).fill('KEK v2 is not configured'));
    expect((await storedDataKeys(environments[0]!))[0]?.kek_version).toBe('v2');
  });

  // During a rolling update that adds v2, a replica restarted with `v1,v2` wrapped each new
  // environment's data key under v2 at once: the replicas still on v1 alone could not read any
  // credential of that environment until they restarted too.
  it('wraps under the sealing version named, so replicas that hold the old KEK alone read what a new one wrote', async () => {
    const environment = newEnvironment();
    const restarted = createKeyring({ keks: [v1, v2], dataKeys: repoA, sealingVersion: 'v1' });
    const blob = await restarted.encrypt(environment, token, SECRET);
    expect((await storedDataKeys(environment))[0]?.kek_version).toBe('v1');
    const notYet = createKeyring({ keks: [v1], dataKeys: repoB });
    expect(await notYet.decrypt(environment, token, blob)).toBe(SECRET);
    // Nothing to move while v1 seals; once the sealing version is v2, rotation moves every key there.
    expect(await restarted.rotate()).toEqual({ rewrapped: 0, unchanged: 1, failed: [] });
    const moved = createKeyring({ keks: [v1, v2], dataKeys: repoA, sealingVersion: 'v2' });
    expect(await moved.rotate()).toEqual({ rewrapped: 1, unchanged: 0, failed: [] });
    expect(await createKeyring({ keks: [v2], dataKeys: repoB }).decrypt(environment, token, blob)).toBe(SECRET);
    expect(() => createKeyring({ keks: [v1], dataKeys: repoA, sealingVersion: 'v2' })).toThrow(/v2/);
  });

  it('rotates a data key: new writes use the new version, old blobs still decrypt and can be re-encrypted', async () => {
    const keyringA = createKeyring({ keks: [v1], dataKeys: repoA });
    const keyringB = createKeyring({ keks: [v1], dataKeys: repoB, activeVersionTtlMs: 0 });
    const environment = newEnvironment();
    const old = await keyringA.encrypt(environment, token, SECRET);

    expect(await keyringA.rotateDataKey(environment)).toBe(2);
    const fresh = await keyringA.encrypt(environment, token, SECRET);
    expect(fresh.startsWith('lk1.2.')).toBe(true);
    // The other replica sees the rotation once its active-version cache expires (here at once).
    expect((await keyringB.encrypt(environment, token, SECRET)).startsWith('lk1.2.')).toBe(true);
    expect(await keyringB.decrypt(environment, token, old)).toBe(SECRET);
    expect(await keyringB.decrypt(environment, token, fresh)).toBe(SECRET);

    const docs = await storedDataKeys(environment);
    expect(docs.map((doc) => [doc.version, doc.retired_at === null])).toEqual([[1, false], [2, true]]);

    const moved = await keyringA.reencrypt(environment, token, old);
    expect(moved.startsWith('lk1.2.')).toBe(true);
    expect(await keyringB.decrypt(environment, token, moved)).toBe(SECRET);
    expect(await keyringA.reencrypt(environment, token, fresh)).toBe(fresh);
    await expect(keyringA.reencrypt(environment, { ...token, field: 'other' }, old)).rejects.toThrow(DecryptionError);
  });

  it('creates exactly one data key when replicas race on first use', async () => {
    const keyrings = [createKeyring({ keks: [v1], dataKeys: repoA }), createKeyring({ keks: [v1], dataKeys: repoB })];
    const environment = newEnvironment();
    const blobs = await Promise.all(
      Array.from({ length: 20 }, (_, index) => keyrings[index % 2]!.encrypt(environment, token, `${SECRET}-${index}`)),
    );

    expect(await storedDataKeys(environment)).toHaveLength(1);
    for (const [index, blob] of blobs.entries()) {
      expect(blob.startsWith('lk1.1.')).toBe(true);
      expect(await keyrings[(index + 1) % 2]!.decrypt(environment, token, blob)).toBe(`${SECRET}-${index}`);
    }
  });

  it('seals JSON and validates it on the way out without echoing it', async () => {
    const keyring = createKeyring({ keks: [v1], dataKeys: repoA });
    const environment = newEnvironment();
    const aad = { integrationId: 'int_1', field: 'credentials' };
    const blob = await keyring.encryptJson(environment, aad, { username: 'ada', password: SECRET });

    const schema = z.object({ username: z.string(), password: z.string() });
    expect(await keyring.decryptJson(environment, aad, blob, schema)).toEqual({ username: 'ada', password: SECRET });

    const error = await keyring.decryptJson(environment, aad, blob, z.object({ password: z.number() })).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DecryptionError);
    expect((error as Error).message).toContain('password');
    expect((error as Error).message).not.toContain(SECRET);

    const notJson = await keyring.encrypt(environment, aad, SECRET);
    const parseError = await keyring.decryptJson(environment, aad, notJson, schema).catch((caught: unknown) => caught);
    expect(parseError).toBeInstanceOf(DecryptionError);
    expect((parseError as Error).message).not.toContain(SECRET);
  });
});
