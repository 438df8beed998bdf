import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId, type EnvironmentId } from '@latchkey/mongo';
import { startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { createDeploymentRepo, type DeploymentRepo } from '../db/deployment-repo.js';
import { createRecordRepo } from '../db/record-repo.js';
import { scheduleModel } from '../db/schedule-model.js';
import { createScheduleRepo, type ScheduleRepo } from '../db/schedule-repo.js';
import { deployedHandler, ensureSchedules, setPausedHandler, type SyncsDeps } from './syncs.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let nats: TestNats;
let connection: Connection;
let bus: Bus;
let vault: Bus;
let deployments: DeploymentRepo;
let schedules: ScheduleRepo;
let deps: SyncsDeps;

const HOUR = 3_600_000;
const tickets = (frequency: string) => ({
  type: 'sync' as const,
  name: 'tickets',
  description: { type: 'sync' as const, name: 'tickets', frequency, models: [{ name: 'Ticket', fields: [{ name: 'id', type: 'string' }] }], webhook_subscriptions: [] },
  bundle: 'module.exports = {}',
});
const target = (variant: string) => ({ provider_config_key: 'crm', connection_id: 'c-1', sync_name: 'tickets', variant });

beforeAll(async () => {
  [mongo, nats] = await Promise.all([startMongo(), startNats()]);
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('scheduler'), logger });
  deployments = createDeploymentRepo(connection);
  schedules = createScheduleRepo(connection);
  const records = createRecordRepo(connection);
  await Promise.all([deployments.init(), schedules.init(), records.init()]);
  bus = await createBus({ servers: nats.url, service: 'sync-scheduler', identity: nats.credentials('sync-scheduler'), logger, requestTimeoutMs: 5_000 });
  await ensureStreams(bus);
  // The vault, played by its own identity: every integration has one connection, `c-1` (id 1).
  vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
  vault.serve(vaultContracts.integrationConnections, () => ({ connections: [{ id: 1, connection_id: 'c-1' }], next: null }));
  vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 1, connection_id, provider_config_key, provider: 'crm' }));
  await vault.flush();
  deps = { bus, logger, deployments, schedules, records, minFrequencyMs: 60_000, operations: { record: () => undefined } };
}, 60_000);

afterAll(async () => {
  await vault?.close();
  await bus?.drain();
  await connection?.dropDatabase();
  await connection?.close();
  await Promise.all([mongo?.dispose(), nats?.dispose()]);
});

/** A daily sync deployed, its base schedule made, and variants `eu` and `us` (`us` with its own frequency), each last run an hour ago. */
async function dailyWithVariants(env: EnvironmentId): Promise<Date> {
  await deployments.insertNext(env, 'crm', [tickets('every day')]);
  await deployedHandler(deps)({ environment_id: env, provider_config_key: 'crm' });
  await schedules.ensure(env, target('eu'), 'every day', new Date(), 1);
  await schedules.ensure(env, target('us'), 'every day', new Date(), 1);
  const lastRun = new Date(Date.now() - HOUR);
  await scheduleModel(connection).updateMany({ environment_id: env }, { $set: { last_finished_at: lastRun, next_run_at: new Date(lastRun.getTime() + 24 * HOUR) } }).exec();
  await schedules.setFrequencyOverride(schedules.idOf(env, target('us')), 'every 2 hours', new Date(lastRun.getTime() + 2 * HOUR));
  return lastRun;
}

const timing = async (env: EnvironmentId, variant: string) => {
  const schedule = await schedules.get(env, target(variant));
  return { frequency: schedule?.frequency, override: schedule?.frequency_override, next: schedule?.next_run_at?.getTime() };
};

describe('a redeploy that changes a sync’s frequency', () => {
  // Only base schedules took the new frequency, and none moved its next run: after a redeploy
  // from daily to every 5 minutes, variants ran daily, reverting a variant's override brought back
  // the frequency it was made with, and the base waited out the rest of its day.
  it('moves every schedule of the sync to it, variants too, with its next run; one with its own frequency keeps that and its time', async () => {
    const env = environmentId('env_redeploy');
    const lastRun = await dailyWithVariants(env);
    await deployments.insertNext(env, 'crm', [tickets('every 5 minutes')]);
    await deployedHandler(deps)({ environment_id: env, provider_config_key: 'crm' });
    const fiveMinutesOn = lastRun.getTime() + 5 * 60_000;
    expect(await timing(env, 'base')).toEqual({ frequency: 'every 5 minutes', override: null, next: fiveMinutesOn });
    expect(await timing(env, 'eu')).toEqual({ frequency: 'every 5 minutes', override: null, next: fiveMinutesOn });
    expect(await timing(env, 'us')).toEqual({ frequency: 'every 5 minutes', override: 'every 2 hours', next: lastRun.getTime() + 2 * HOUR });
  });

  it('moves the base schedule’s next run too when a command made it take the frequency before the deploy was heard', async () => {
    const env = environmentId('env_command_first');
    const lastRun = await dailyWithVariants(env);
    await deployments.insertNext(env, 'crm', [tickets('every 5 minutes')]);
    // A command between the deploy and its event: it makes missing base schedules, and met this one.
    await setPausedHandler(deps)({ environment_id: env, provider_config_key: 'crm', syncs: [], connection_id: 'c-1', paused: false });
    await deployedHandler(deps)({ environment_id: env, provider_config_key: 'crm' });
    expect(await timing(env, 'base')).toEqual({ frequency: 'every 5 minutes', override: null, next: lastRun.getTime() + 5 * 60_000 });
    expect(await timing(env, 'eu')).toEqual({ frequency: 'every 5 minutes', override: null, next: lastRun.getTime() + 5 * 60_000 });
  });

  it('keeps the first run of a schedule that has not run yet at once', async () => {
    const env = environmentId('env_not_run');
    await deployments.insertNext(env, 'crm', [tickets('every day')]);
    const made = Date.now();
    await deployedHandler(deps)({ environment_id: env, provider_config_key: 'crm' });
    await deployments.insertNext(env, 'crm', [tickets('every hour')]);
    await deployedHandler(deps)({ environment_id: env, provider_config_key: 'crm' });
    const base = await timing(env, 'base');
    expect(base.frequency).toBe('every hour');
    expect(base.next).toBeLessThanOrEqual(Date.now());
    expect(base.next).toBeGreaterThanOrEqual(made - 1000);
  });
});

describe('a command racing the deploy event', () => {
  // Chaos: the deploy's event made the base schedule between a command's list of schedules and
  // its own `ensure`, which found it there; the command did not read the schedules again and
  // answered 404 unknown_sync_variant for a schedule that existed.
  it('reads the schedules again when one it did not list turns out to exist', async () => {
    const env = environmentId('env_race');
    await deployments.insertNext(env, 'crm', [tickets('every day')]);
    const listed = await schedules.list(env, 'crm', 'c-1');
    expect(listed).toEqual([]);
    // The event's work, landing after the command's list.
    await schedules.ensure(env, target('base'), 'every day', new Date(), 1);
    const syncs = [tickets('every day').description];
    // True: the command reads its schedules again, and finds the base one.
    expect(await ensureSchedules(deps, env, 'crm', [{ connection_id: 'c-1', id: 1 }], syncs, listed)).toBe(true);
  });
});
