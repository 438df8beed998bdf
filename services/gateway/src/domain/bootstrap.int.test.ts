import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createAccountRepo } from '../db/account-repo.js';
import { createApiKeyRepo } from '../db/api-key-repo.js';
import { createEnvironmentRepo } from '../db/environment-repo.js';
import { digestApiKey } from './api-key-secrets.js';
import { bootstrap, type BootstrapDeps } from './bootstrap.js';
import { createSettingsCipher } from './settings-cipher.js';

const logger = createLogger({ service: 'test', silent: true });
const digestSecret = randomBytes(32).toString('hex');
let mongo: TestMongo;
let connection: Connection;
let deps: BootstrapDeps & { apiKeys: ReturnType<typeof createApiKeyRepo> };

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('gateway_bootstrap'), logger });
  const accounts = createAccountRepo(connection);
  const environments = createEnvironmentRepo(connection, createSettingsCipher([{ version: 'v1', key: randomBytes(32) }]));
  const apiKeys = createApiKeyRepo(connection);
  await Promise.all([accounts.init(), environments.init(), apiKeys.init()]);
  deps = { accounts, environments, apiKeys, logger };
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

const secret = () => `lk_${randomBytes(24).toString('base64url')}`;

describe('the bootstrap key', () => {
  // BOOTSTRAP_SECRET_KEY stays in the deployment's secret: a leaked bootstrap key the operator
  // revoked came back, with full access, at the next start of any gateway replica.
  it('is created once: revoked, it stays revoked across restarts; a new secret makes a new key', async () => {
    const first = secret();
    const start = (secretKey: string) => bootstrap(deps, { environmentName: 'boot', secretKey, digestSecret });
    await start(first);
    await start(first);
    const key = await deps.apiKeys.findByDigest(digestApiKey(first, digestSecret));
    expect(key).not.toBeNull();
    const environment = (await deps.environments.findByName('boot'))!;
    expect(await deps.apiKeys.list(environmentId(environment._id))).toHaveLength(1);

    await deps.apiKeys.delete(environmentId(environment._id), key!);
    await start(first);
    expect(await deps.apiKeys.findByDigest(digestApiKey(first, digestSecret))).toBeNull();

    // The operator sets a new secret: its key is made, once.
    const second = secret();
    await start(second);
    await start(second);
    expect(await deps.apiKeys.findByDigest(digestApiKey(second, digestSecret))).not.toBeNull();
    expect(await deps.apiKeys.list(environmentId(environment._id))).toHaveLength(1);
  });
});
