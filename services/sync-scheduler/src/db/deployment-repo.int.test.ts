import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { Connection, mongo as driver } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, watchCommands, type TestMongo } from '@latchkey/testing';
import { deploymentModel } from './deployment-model.js';
import { createDeploymentRepo, type DeploymentRepo } from './deployment-repo.js';

let mongo: TestMongo;
let dbName: string;
let connection: Connection;
let deployments: DeploymentRepo;

/** The heads, as stored (what a deploy cut short, or a raise undone, leaves is written here by hand). */
const heads = () => connection.collection('function_deployment_heads') as unknown as driver.Collection<{ _id: string; environment_id: string; provider_config_key: string; version: number; deployment_id: string | null }>;

const action = (name: string) => ({ type: 'action' as const, name, description: { type: 'action' as const, name, has_input_schema: false }, bundle: `/* ${name} */` });

beforeAll(async () => {
  mongo = await startMongo();
  dbName = uniqueDbName('scheduler');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger: createLogger({ service: 'test', level: 'error' }) });
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

/**
 * The current deployment is read on every inbound webhook routed to a connection, every sync
 * command and status, and every connection made: it was the newest by a sorted query, which
 * FerretDB answers by reading every deployment of every environment, code and all. It must be
 * `_id` lookups, whatever the collection holds.
 */
describe('the current deployment', () => {
  it('is found by `_id` lookups alone, with its code or without, once its integration has a head', async () => {
    const env = environmentId('env_lookup');
    // Other integrations' deployments and heads beside it, so that a scan and a lookup differ in
    // the plan (PostgreSQL's planner reads a table of a few rows whole).
    const others = Array.from({ length: 3000 }, (_, i) => ({ key: `other-${i}`, id: `other-${i}:1` }));
    await (deploymentModel(connection).collection as unknown as driver.Collection<{ _id: string }>).insertMany(
      others.map(({ key, id }) => ({ _id: id, environment_id: 'env_others', provider_config_key: key, version: 1, functions: [], created_at: new Date() })),
    );
    await heads().insertMany(others.map(({ key, id }) => ({ _id: key, environment_id: 'env_others', provider_config_key: key, version: 1, deployment_id: id })));
    await deployments.insertNext(env, 'crm', [action('a')]);
    const newest = await deployments.insertNext(env, 'crm', [action('a'), action('b')]);
    const { connection: watched, commands, close } = await watchCommands(mongo.uri, dbName);
    try {
      const watchedRepo = createDeploymentRepo(watched);
      commands.length = 0;
      const current = await watchedRepo.current(env, 'crm');
      expect(current?.version).toBe(newest.version);
      expect(current?.functions.map((fn) => fn.bundle)).toEqual(['/* a */', '/* b */']);
      const described = await watchedRepo.currentDescriptions(env, 'crm');
      expect(described?.version).toBe(newest.version);
      expect(described?.functions.map((fn) => fn.name)).toEqual(['a', 'b']);
      expect(described?.functions.every((fn) => !('bundle' in fn))).toBe(true);
      expect(await watchedRepo.currentDescriptions(env, 'none')).toBeNull();
      commands.length = 0;
      await watchedRepo.current(env, 'crm');
      await watchedRepo.currentDescriptions(env, 'crm');
      await watchedRepo.currentDescriptions(env, 'none');
      const finds = commands.filter((command) => command.name === 'find');
      expect(finds.length).toBeGreaterThan(0);
      for (const { body } of finds) {
        const filter = body['filter'] as Record<string, unknown>;
        expect(Object.keys(filter)).toEqual(['_id']);
        expect(typeof filter['_id']).toBe('string');
        expect(body['sort']).toBeUndefined();
      }
      expect(commands.map((command) => command.name).filter((name) => ['aggregate', 'count', 'getMore', 'distinct'].includes(name))).toEqual([]);
    } finally {
      await close();
    }
    // And each lookup is an index lookup on this server.
    const head = await heads().findOne({ environment_id: env, provider_config_key: 'crm' });
    expect(head?.version).toBe(newest.version);
    const headVerdict = await explainUntilIndexed(() => heads().find({ _id: head!._id }));
    expect(headVerdict.indexed ? 'indexed' : headVerdict.summary).toBe('indexed');
    const stored = deploymentModel(connection).collection as unknown as driver.Collection<{ _id: string }>;
    const verdict = await explainUntilIndexed(() => stored.find({ _id: head!.deployment_id! }));
    expect(verdict.indexed ? 'indexed' : verdict.summary).toBe('indexed');
  }, 60_000);

  it('is the newest when the head was left behind: a deploy cut short before raising it, or a raise a concurrent one undid', async () => {
    const env = environmentId('env_behind');
    const first = await deployments.insertNext(env, 'crm', [action('one')]);
    await deployments.insertNext(env, 'crm', [action('two')]);
    await deployments.insertNext(env, 'crm', [action('three')]);
    // What FerretDB can leave: the head back at the first version.
    await heads().updateOne({ environment_id: env, provider_config_key: 'crm' }, { $set: { version: 1, deployment_id: first._id } });
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['three']);
    expect((await deployments.currentDescriptions(env, 'crm'))?.version).toBe(3);
    // The reader raised it; the next deploy numbers on from the newest.
    expect((await heads().findOne({ environment_id: env, provider_config_key: 'crm' }))?.version).toBe(3);
    expect((await deployments.insertNext(env, 'crm', [action('four')])).version).toBe(4);
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['four']);
  });

  it('of deployments stored before heads were kept is read as before once, then by its head; numbers go on', async () => {
    const env = environmentId('env_before_heads');
    // As an earlier version stored them: random ids, no head.
    const stored = (version: number, name: string) =>
      deploymentModel(connection).create({ _id: randomUUID(), environment_id: env, provider_config_key: 'crm', version, functions: [action(name)], created_at: new Date() });
    await stored(1, 'old-1');
    await stored(2, 'old-2');
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['old-2']);
    expect((await heads().findOne({ environment_id: env, provider_config_key: 'crm' }))?.version).toBe(2);
    // An integration with none gets a head too: its next read is a lookup, not the old read.
    expect(await deployments.current(env, 'empty')).toBeNull();
    expect((await heads().findOne({ environment_id: env, provider_config_key: 'empty' }))?.version).toBe(0);
    expect((await deployments.insertNext(env, 'empty', [action('first')])).version).toBe(1);
    expect((await deployments.current(env, 'empty'))?.functions.map((fn) => fn.name)).toEqual(['first']);
    // A replica of the earlier version deploys meanwhile (a rolling upgrade): no head raised.
    await stored(3, 'old-3');
    expect((await deployments.insertNext(env, 'crm', [action('new')])).version).toBe(4);
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['new']);
    // Announced (functions.deployed) at a version the head has not reached: read as before.
    await stored(5, 'old-5');
    expect((await deployments.currentDescriptions(env, 'crm', { atLeast: 5 }))?.functions.map((fn) => fn.name)).toEqual(['old-5']);
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['old-5']);
  });

  it("of an integration removed is none, and the key's next deploy starts again at 1", async () => {
    const env = environmentId('env_removed');
    await deployments.insertNext(env, 'crm', [action('old-a')]);
    await deployments.insertNext(env, 'crm', [action('old-b')]);
    expect((await deployments.current(env, 'crm'))?.version).toBe(2);
    expect(await deployments.removeUpTo(env, 'crm', new Date())).toBe(2);
    expect(await deployments.current(env, 'crm')).toBeNull();
    expect(await deployments.currentDescriptions(env, 'crm')).toBeNull();
    const again = await deployments.insertNext(env, 'crm', [action('new')]);
    expect(again.version).toBe(1);
    expect((await deployments.current(env, 'crm'))?.functions.map((fn) => fn.name)).toEqual(['new']);
  });
});
