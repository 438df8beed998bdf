import { createCompiler } from '@latchkey/compiler';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { busOperationLog, consume, createKvLocks, DAY_OF_DELIVERIES, openKv, recordedHandler, WRITE_KEYS } from '@latchkey/bus';
import { STREAMS, functionsContracts, recordsContracts, syncContracts, vaultContracts } from '@latchkey/contracts';
import { repeatEvery, type Runtime } from '@latchkey/runtime';
import type { Config } from './config.js';
import { createDeploymentRepo } from './db/deployment-repo.js';
import { createRecordRepo } from './db/record-repo.js';
import { createScheduleRepo } from './db/schedule-repo.js';
import { serializedRecordWrites } from './domain/record-writes.js';
import { serializedScheduleWrites } from './domain/schedule-writes.js';
import {
  beginRunHandler,
  connectionCreatedHandler,
  createVariantHandler,
  deleteVariantHandler,
  deployedHandler,
  finishRunHandler,
  integrationRemovedHandler,
  reportProgressHandler,
  webhookRunFinishedHandler,
  setPausedHandler,
  startRun,
  statusHandler,
  triggerHandler,
  updateFrequencyHandler,
} from './handlers/syncs.js';
import { createLease, type LeaseEntry } from './scheduling/lease.js';
import { createDueSchedules } from './scheduling/due-schedules.js';
import { startSchedulerLoop } from './scheduling/scheduler-loop.js';
import { connectionDeletedHandler, connectionHolder } from './handlers/connection-deleted.js';
import { schedulerLeaderHandler } from './handlers/scheduler-leader.js';
import { listRecordsHandler, pruneRecordsHandler, writeRecordsHandler } from './handlers/records.js';
import { compileHandler, deployHandler, getFunctionHandler, listActionsHandler, listLifecycleHandler, listWebhookSyncsHandler, scriptsConfigHandler } from './handlers/functions.js';

/** How long a finished sync run is kept (its schedule keeps its last outcome itself). */
const RUN_RETENTION_MS = 7 * 24 * 3600 * 1000;
/**
 * A run never finished (its job never stored, or dropped at the jobs stream's age limit) is kept
 * as long, counted from when its job could last have been delivered.
 */
const UNFINISHED_RUN_RETENTION_MS = STREAMS.jobs.maxAgeMs + RUN_RETENTION_MS;
const RUN_SWEEP_INTERVAL_MS = 3600 * 1000;

/** Wires the sync-scheduler: deployed functions, the records store, schedules and runs, the leased scheduler loop. */
export async function startScheduler(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
  const deployments = createDeploymentRepo(mongo);
  await deployments.init();
  const deps = { bus, deployments, maxDeploymentBytes: config.MAX_DEPLOYMENT_BYTES, minFrequencyMs: config.SYNC_MIN_FREQUENCY_MS };
  // The operations log: deploys and sync runs.
  const operations = busOperationLog(bus, logger, 'sync-scheduler');
  runtime.onShutdown(() => operations.flush());
  bus.serve(
    functionsContracts.deploy,
    recordedHandler(operations, 'deploy', deployHandler(deps), (request, answer) => ({
      environment_id: request.environment_id,
      ...(answer ? { integration_id: answer.provider_config_key } : {}),
    })),
  );
  bus.serve(functionsContracts.get, getFunctionHandler(deps));
  bus.serve(functionsContracts.listLifecycle, listLifecycleHandler(deps));
  bus.serve(functionsContracts.listWebhookSyncs, listWebhookSyncsHandler(deps));
  bus.serve(functionsContracts.scriptsConfig, scriptsConfigHandler(deps));
  bus.serve(functionsContracts.listActions, listActionsHandler(deps));
  // Its child starts with the first compile (a second or two, loading esbuild and TypeScript):
  // a replica that never compiles holds neither, and pays nothing for them at start.
  const compiler = createCompiler();
  bus.serve(functionsContracts.compile, compileHandler({ compiler }));
  runtime.onShutdown(() => compiler.close());

  // Writes to one schedule, and to one scope's records, go one at a time across replicas (see
  // schedule-writes and record-writes): each holds its key in this bucket.
  const scheduleLocks = await openKv<{ owner: string }>(bus, { name: 'sync_schedule_locks', ttlMs: WRITE_KEYS.ttlMs });
  const rawRecords = createRecordRepo(mongo);
  await rawRecords.init();
  const records = serializedRecordWrites(rawRecords, createKvLocks(scheduleLocks));
  bus.serve(recordsContracts.list, listRecordsHandler({ bus, records }));
  bus.serve(recordsContracts.prune, pruneRecordsHandler({ bus, records }));
  // Every write of a schedule's due state is announced, in chunks, to the leader's due index.
  const rawSchedules = createScheduleRepo(mongo, {
    staleRunMs: config.SYNC_RUN_STALE_MS,
    unstartedRunMs: config.SYNC_RUN_UNSTARTED_MS,
    onChange: (ids) => {
      for (let start = 0; start < ids.length; start += 1000) bus.broadcast(syncContracts.scheduleChanged, { ids: ids.slice(start, start + 1000) });
    },
  });
  const schedules = serializedScheduleWrites(rawSchedules, createKvLocks(scheduleLocks));
  await schedules.init();
  // A sync run's writes are refused once the run is over: they check it in its schedules' runs.
  bus.serve(recordsContracts.write, writeRecordsHandler({ bus, records, runs: schedules }));
  const syncDeps = { bus, logger, deployments, schedules, records, operations, minFrequencyMs: config.SYNC_MIN_FREQUENCY_MS };
  bus.serve(syncContracts.trigger, triggerHandler(syncDeps));
  bus.serve(syncContracts.setPaused, setPausedHandler(syncDeps));
  bus.serve(syncContracts.status, statusHandler(syncDeps));
  bus.serve(syncContracts.updateFrequency, updateFrequencyHandler(syncDeps));
  bus.serve(syncContracts.createVariant, createVariantHandler(syncDeps));
  bus.serve(syncContracts.deleteVariant, deleteVariantHandler(syncDeps));
  bus.serve(syncContracts.beginRun, beginRunHandler(syncDeps));
  bus.serve(syncContracts.finishRun, finishRunHandler(syncDeps));
  bus.serve(syncContracts.reportProgress, reportProgressHandler(syncDeps));
  bus.serve(syncContracts.webhookRunFinished, webhookRunFinishedHandler(syncDeps));
  const deployed = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'sync-scheduler-deployed',
    deliverPolicy: 'new',
    contract: functionsContracts.deployed,
    concurrency: 2,
    handler: deployedHandler(syncDeps),
  });
  const created = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'sync-scheduler-connection-created',
    deliverPolicy: 'new',
    // A connection's syncs are made, or its records deleted, on this fact alone: an outage is waited out.
    maxDeliveries: DAY_OF_DELIVERIES,
    contract: vaultContracts.connectionCreated,
    concurrency: 4,
    handler: connectionCreatedHandler({ ...syncDeps, holderOf: connectionHolder(syncDeps) }),
  });
  // Exactly one replica schedules: the holder of the lease, renewed every tick. The entry names
  // the holder as `<host>/<pid>/<random>`, so which process leads can be read from outside.
  const leaseKv = await openKv<LeaseEntry>(bus, { name: 'sync_scheduler_lease', ttlMs: config.SCHEDULER_LEASE_MS });
  const lease = createLease(leaseKv, 'leader', `${hostname()}/${process.pid}/${randomUUID()}`);
  bus.serve(syncContracts.leader, schedulerLeaderHandler({ lease: leaseKv, key: 'leader' }));
  const dueSchedules = createDueSchedules({
    logger,
    all: () => schedules.all(),
    one: (id) => schedules.getSchedule(id),
    rescanMs: config.SCHEDULER_RESCAN_MS,
    // A lost claim can be taken back once it is older than the unstarted limit: tried a few times within it.
    overdueRetryMs: Math.max(config.SCHEDULER_TICK_MS, Math.round(config.SYNC_RUN_UNSTARTED_MS / 4)),
  });
  bus.onBroadcast(syncContracts.scheduleChanged, ({ ids }) => dueSchedules.changed(ids));
  // What was announced while NATS was away is lost: the whole collection is read again.
  bus.onReconnect(() => dueSchedules.reset());
  const loop = startSchedulerLoop({
    logger,
    lease,
    tickMs: config.SCHEDULER_TICK_MS,
    due: (now, limit) => dueSchedules.due(now, limit),
    onLeadership: () => dueSchedules.reset(),
    startRun: (schedule, now) => startRun(syncDeps, schedule, now),
  });
  // Old runs are forgotten by the lease holder alone (one full read of the runs on FerretDB an
  // hour, not one per replica); a sweep that outlasts the interval is not stacked upon.
  const runSweep = repeatEvery(
    RUN_SWEEP_INTERVAL_MS,
    async () => {
      if (!lease.holding()) return;
      const now = Date.now();
      await schedules.removeOldRuns({ finishedBefore: new Date(now - RUN_RETENTION_MS), unfinishedCreatedBefore: new Date(now - UNFINISHED_RUN_RETENTION_MS) });
    },
    (error) => logger.warn('could not remove old sync runs', { error }),
  );
  runtime.onShutdown(async () => {
    await Promise.all([runSweep.stop(), loop.stop()]);
    await Promise.all([deployed.stop(), created.stop()]);
  });

  // A deleted connection's records and schedules go with it.
  const deletions = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'sync-scheduler-connection-deleted',
    // A connection's syncs are made, or its records deleted, on this fact alone: an outage is waited out.
    maxDeliveries: DAY_OF_DELIVERIES,
    contract: vaultContracts.connectionDeleted,
    concurrency: 4,
    handler: connectionDeletedHandler({ ...syncDeps, holderOf: connectionHolder(syncDeps) }),
  });
  runtime.onShutdown(() => deletions.stop());

  // A removed integration's deployed functions go with it. Every such fact the stream holds is
  // read at first (they drop only what was deployed before each).
  const removals = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'sync-scheduler-integration-removed',
    // The key's functions go on this fact alone: an outage is waited out.
    maxDeliveries: DAY_OF_DELIVERIES,
    contract: vaultContracts.integrationRemoved,
    concurrency: 2,
    handler: integrationRemovedHandler(syncDeps),
  });
  runtime.onShutdown(() => removals.stop());
}
