import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createDeploymentRepo, type DeploymentRepo } from './deployment-repo.js';

let mongo: TestMongo;
let connection: Connection;
let deployments: DeploymentRepo;

const action = (name: string) => ({ type: 'action' as const, name, description: { type: 'action' as const, name, has_input_schema: false }, bundle: `/* ${name} */` });

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('scheduler'), logger: createLogger({ service: 'test', level: 'error' }) });
  deployments = createDeploymentRepo(connection);
  await deployments.init();
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('deployments', () => {
  it('number concurrent deploys one after the other, and the newest is current, whole', async () => {
    const env = environmentId('env_a');
    const done = await Promise.all(Array.from({ length: 4 }, (_, i) => deployments.insertNext(env, 'crm', [action(`a${i}`), action(`b${i}`)])));
    expect(done.map((doc) => doc.version).sort()).toEqual([1, 2, 3, 4]);
    const current = await deployments.current(env, 'crm');
    expect(current?.version).toBe(4);
    const newest = done.find((doc) => doc.version === 4)!;
    expect(current?.functions.map((fn) => fn.name)).toEqual(newest.functions.map((fn) => fn.name));
    // Another environment and another integration see none of it.
    expect(await deployments.current(environmentId('env_b'), 'crm')).toBeNull();
    expect(await deployments.current(env, 'erp')).toBeNull();
  });

  it('keep the five newest versions, and list them without code', async () => {
    const env = environmentId('env_c');
    for (let i = 0; i < 7; i++) await deployments.insertNext(env, 'crm', [action('only')]);
    const summaries = await deployments.summaries(env);
    expect(summaries.map((doc) => doc.version).sort()).toEqual([3, 4, 5, 6, 7]);
    expect(summaries.every((doc) => doc.functions.every((fn) => !('bundle' in fn)))).toBe(true);
  });
});
