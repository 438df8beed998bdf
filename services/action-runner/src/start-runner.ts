import { busOperationLog, consume, DAY_OF_DELIVERIES, HAND_BACK_WAIT_MS, recordedHandler } from '@latchkey/bus';
import { STREAMS, actionContracts, functionsContracts, syncContracts, vaultContracts, webhookContracts } from '@latchkey/contracts';
import type { Runtime } from '@latchkey/runtime';
import { syncSlots, type Config } from './config.js';
import { createActionRunRepo } from './db/action-run-repo.js';
import { createLifecycleRunRepo } from './db/lifecycle-run-repo.js';
import { createFunctionCache } from './domain/function-cache.js';
import { createKnownConnections } from './domain/known-connections.js';
import { createLimiter } from './domain/limiter.js';
import { createRunner } from './domain/run-function.js';
import { disposeIdleIsolates } from './sandbox/run-in-sandbox.js';
import { getActionResultHandler, runAsyncActionHandler, triggerActionHandler } from './handlers/actions.js';
import { runSyncHandler } from './handlers/syncs.js';
import { dryRunHandler, postCreationHandler, preDeletionHandler, webhookHandler } from './handlers/functions.js';

/** How long an async action's result can be read after it finished. */
const RESULT_RETENTION_MS = 7 * 24 * 3600 * 1000;
/**
 * A run never finished (its job never reached JetStream, or JetStream dropped it at the jobs
 * stream's age limit) is kept as long as a finished one, counted from when its job could last
 * have been delivered.
 */
const UNFINISHED_RETENTION_MS = STREAMS.jobs.maxAgeMs + RESULT_RETENTION_MS;
const SWEEP_INTERVAL_MS = 3600 * 1000;
/**
 * How long a lifecycle function or a sync's `onWebhook` that ran is remembered for its event's
 * redeliveries: longer than the day of deliveries an outage of ours is waited out for.
 */
const LIFECYCLE_RUN_RETENTION_MS = 2 * 24 * 3600 * 1000;
/**
 * Of SHUTDOWN_TIMEOUT_MS, what is kept for after the hand-back: the runs stopped and their
 * messages nak'ed (HAND_BACK_WAIT_MS at most), then 2 s for the operations log's last flush,
 * NATS drained (a sync action or dry run in flight answered) and MongoDB closed.
 */
const SHUTDOWN_MARGIN_MS = HAND_BACK_WAIT_MS + 2_000;

/**
 * Wires the action-runner: the function cache kept in step with deploys, the sandbox runner
 * (bounded per replica), `action.*` in queue group `action-runner`, the durable consumers of
 * async actions, `connection.created` (post-creation functions) and `webhook.received` (onWebhook).
 */
export async function startRunner(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
  const runs = createActionRunRepo(mongo);
  await runs.init();
  const lifecycleRuns = createLifecycleRunRepo(mongo);
  await lifecycleRuns.init();
  const cache = createFunctionCache({ ttlMs: config.FUNCTION_CACHE_MS, maxEntries: 5000, maxBytes: 64 * 1024 * 1024 });
  bus.onBroadcast(functionsContracts.deploymentChanged, ({ environment_id, provider_config_key }) => cache.invalidate(environment_id, provider_config_key));
  const connections = createKnownConnections({ ttlMs: 60_000, maxEntries: 100_000 });
  // Followed live (every replica hears every deletion), not as a durable consumer.
  bus.follow(vaultContracts.connectionDeleted, (deleted) => connections.forget(deleted.environment_id, deleted.provider_config_key, deleted.connection_id));
  bus.onReconnect(() => {
    cache.clear();
    connections.clear();
  });
  const runner = createRunner({
    bus,
    logger,
    cache,
    proxyTimeoutMs: config.PROXY_TIMEOUT_MS,
    publicUrl: config.PUBLIC_URL,
    limits: { memoryMb: config.FUNCTION_MEMORY_MB, timeoutMs: config.FUNCTION_TIMEOUT_MS },
    syncLimits: { timeoutMs: config.SYNC_TIMEOUT_MS, cpuTimeMs: config.SYNC_CPU_TIMEOUT_MS },
    warmIsolates: config.FUNCTION_WARM_ISOLATES,
    limited: createLimiter(config.FUNCTION_CONCURRENCY),
  });
  const operations = busOperationLog(bus, logger, 'action-runner');
  runtime.onShutdown(() => operations.flush());
  // Runs a caller waits for (synchronous actions, dry runs, pre-deletion) are cut off and answered
  // 503 when the grace below ends, while NATS still carries the answer (`untilStopped`).
  const stopping = new AbortController();
  const actionDeps = { bus, logger, runner, runs, connections, operations, streamIdleMs: config.REQUEST_TIMEOUT_MS * 6, stopping: stopping.signal, lifecycleRuns };
  // A run answered at once is logged here; a queued one when it ends (runAsyncActionHandler).
  bus.serve(
    actionContracts.trigger,
    recordedHandler(operations, 'action_run', triggerActionHandler(actionDeps), (request, answer) =>
      answer?.status === 'queued'
        ? undefined
        : { environment_id: request.environment_id, integration_id: request.provider_config_key, connection_id: request.connection_id },
    ),
  );
  bus.serve(actionContracts.getResult, getActionResultHandler(actionDeps));
  bus.serve(actionContracts.dryRun, dryRunHandler(actionDeps));
  bus.serve(actionContracts.runPreDeletion, preDeletionHandler(actionDeps));

  // A replica reports every 5 s that it still holds a message; one silent for 15 s has died
  // and JetStream hands its messages to another. A replica that stops lets the runs it holds
  // finish while SHUTDOWN_TIMEOUT_MS leaves room, then stops them and hands them back at once.
  const delivery = { ackWaitMs: 15_000, heartbeatMs: 5_000, handBackAfterMs: Math.max(0, config.SHUTDOWN_TIMEOUT_MS - SHUTDOWN_MARGIN_MS) };
  const asyncActions = await consume({
    bus,
    logger,
    stream: STREAMS.jobs.name,
    durable: 'action-runner-actions',
    contract: actionContracts.run,
    concurrency: config.FUNCTION_CONCURRENCY,
    ...delivery,
    handler: runAsyncActionHandler(actionDeps),
  });
  const syncRuns = await consume({
    bus,
    logger,
    stream: STREAMS.jobs.name,
    durable: 'action-runner-syncs',
    contract: syncContracts.run,
    // Not every slot: the rest stay free for short work while syncs run for hours.
    concurrency: syncSlots(config),
    ...delivery,
    // A sync may run for hours and carries on from its last checkpoint: handed back at once.
    handBackAfterMs: 0,
    handler: runSyncHandler(actionDeps, { progressEveryMs: config.SYNC_PROGRESS_INTERVAL_MS }),
  });
  const postCreation = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'action-runner-post-creation',
    deliverPolicy: 'new',
    contract: vaultContracts.connectionCreated,
    concurrency: Math.max(1, Math.floor(config.FUNCTION_CONCURRENCY / 2)),
    ...delivery,
    // Nothing else runs them: an outage of ours is waited out.
    maxDeliveries: DAY_OF_DELIVERIES,
    handler: postCreationHandler(actionDeps),
  });
  const webhooks = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'action-runner-webhooks',
    deliverPolicy: 'new',
    contract: webhookContracts.received,
    concurrency: Math.max(1, Math.floor(config.FUNCTION_CONCURRENCY / 2)),
    ...delivery,
    // The provider was answered 200 and sends nothing again: an outage of ours is waited out.
    maxDeliveries: DAY_OF_DELIVERIES,
    handler: webhookHandler(actionDeps, DAY_OF_DELIVERIES),
  });
  // Async results are kept a week, then forgotten, as are runs that never finished; every replica
  // sweeps (deleting is idempotent).
  const sweep = setInterval(() => {
    const now = Date.now();
    runs
      .removeExpired({ finishedBefore: new Date(now - RESULT_RETENTION_MS), unfinishedCreatedBefore: new Date(now - UNFINISHED_RETENTION_MS) })
      .catch((error: unknown) => logger.warn('could not remove old action runs', { error }));
    lifecycleRuns.removeBefore(new Date(now - LIFECYCLE_RUN_RETENTION_MS)).catch((error: unknown) => logger.warn('could not remove old lifecycle run marks', { error }));
  }, SWEEP_INTERVAL_MS);
  sweep.unref();
  // From the moment shutdown begins: synchronous actions are served requests, which the runtime
  // waits for before the hooks below, so their deadline must already be running then.
  let started = Date.now();
  runtime.onStopping(() => {
    started = Date.now();
    setTimeout(() => stopping.abort(), delivery.handBackAfterMs);
  });
  runtime.onShutdown(async () => {
    clearInterval(sweep);
    const consumers = { actions: asyncActions, syncs: syncRuns, post_creation: postCreation, webhooks };
    const took: Record<string, number> = {};
    await Promise.all(Object.entries(consumers).map(async ([name, consumer]) => {
      await consumer.stop();
      took[name] = Date.now() - started;
    }));
    disposeIdleIsolates();
    // Past the grace and most of the margin, the rest of the shutdown may not fit.
    if (Date.now() - started > delivery.handBackAfterMs + SHUTDOWN_MARGIN_MS / 2) logger.warn('runs took long to finish or hand back', { took_ms: took });
  });
}
