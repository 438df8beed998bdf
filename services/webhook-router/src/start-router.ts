import { busOperationLog, consume, consumeBatches, DAY_OF_DELIVERIES, HAND_BACK_WAIT_MS, type RunningConsumer } from '@latchkey/bus';
import { cachedLoader } from '@latchkey/cache';
import { STREAMS, actionContracts, gatewayContracts, syncContracts, vaultContracts, vaultWebhookContracts, webhookContracts } from '@latchkey/contracts';
import { createAddressPolicy, parseCidrList } from '@latchkey/net';
import type { Runtime } from '@latchkey/runtime';
import { perUrlSlots, type Config } from './config.js';
import { createDeliveryRepo } from './db/delivery-repo.js';
import { createInboundWebhookRepo } from './db/inbound-webhook-repo.js';
import { createParkedDeliveryRepo } from './db/parked-delivery-repo.js';
import { withInboundOperations } from './handlers/inbound-operations.js';
import { createWebhookClaimRepo } from './db/webhook-claim-repo.js';
import { createWebhookSender } from './delivery/send-webhook.js';
import { createCircuitBreakers } from './domain/circuit-breaker.js';
import { createDestinationSlots } from './domain/destination-slots.js';
import { asyncActionCompletedHandler } from './handlers/async-action-webhooks.js';
import { syncRunCompletedHandler } from './handlers/sync-webhooks.js';
import { connectionCreatedHandler, refreshFailedHandler } from './handlers/auth-webhooks.js';
import { deliverWebhookHandler } from './handlers/deliver-webhook.js';
import { environmentByPublicIdLoader, inboundWebhooksHandler } from './handlers/inbound-webhook.js';
import { listAttemptsHandler } from './handlers/list-attempts.js';
import { listInboundLogHandler } from './handlers/list-inbound-log.js';
import { startReturningParked } from './parking/return-parked-deliveries.js';
import { countingInbound, sampleWebhookGauges } from './webhook-metrics.js';

/**
 * How long the router trusts what it asked the gateway and the vault (environment settings,
 * signing keys, an integration's secret and forwarding flag): a burst of webhooks costs one
 * request, and a change is felt within this time.
 */
const SETTINGS_TTL_MS = 2_000;

/**
 * The longest a delivery waits in memory for a slot of its URL (one whose share of the slots is
 * in flight, and whose pace says one frees this soon): meanwhile it holds one of the consumer's,
 * which every other environment's deliveries may need.
 */
const SLOT_WAIT_MS = 1_000;

/** How often the collections of replay claims, and of parked deliveries' marks, that no one reads any more are dropped. */
const CLAIM_SWEEP_MS = 10 * 60_000;

/**
 * Parked deliveries are kept by slot of due time and returned once their slot is past, looked
 * for every poll: a delivery comes back at most a slot and a poll late, both a fraction of the
 * shortest wait that is parked (`WEBHOOK_PARK_AFTER_MS`).
 */
const parkSlotMs = (config: Config) => Math.min(10_000, Math.max(25, Math.floor(config.WEBHOOK_PARK_AFTER_MS / 2)));
const parkPollMs = (config: Config) => Math.min(1_000, parkSlotMs(config));

/**
 * Wires the webhook router: durable consumers for provider webhooks (`jobs.webhook.inbound`),
 * deliveries (`jobs.webhook.deliver`) and the connection events that make auth webhooks; each
 * consumer is shared by every replica (same durable name), so work is spread and never lost.
 */
export async function startRouter(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
  // The operations log: every provider webhook's outcome and every delivery attempt.
  const operations = busOperationLog(bus, logger, 'webhook-router');
  runtime.onShutdown(() => operations.flush());
  const inbound = withInboundOperations(countingInbound(createInboundWebhookRepo(mongo)), operations);
  const deliveries = createDeliveryRepo(mongo);
  const parked = createParkedDeliveryRepo(mongo, { slotMs: parkSlotMs(config) });
  const claims = createWebhookClaimRepo(mongo);
  await Promise.all([inbound.init(), deliveries.init(), claims.init()]);
  // Expired replay claims go with their window's collection, dropped whole (FerretDB has no TTL
  // index, and reads every claim for a query on their expiry); a late sweep only costs disk.
  const sweep = setInterval(() => {
    claims.sweep().catch((error: unknown) => logger.warn('could not drop the expired webhook claims', { error: String(error) }));
    parked.sweepMarks().catch((error: unknown) => logger.warn('could not drop the marks of old parked deliveries', { error: String(error) }));
    // The logs are kept WEBHOOK_LOG_RETENTION_DAYS: without it, anyone sending webhooks to a known URL would grow them for good.
    const kept = new Date(Date.now() - config.WEBHOOK_LOG_RETENTION_DAYS * 24 * 3600_000);
    Promise.all([inbound.prune(kept), deliveries.prune(kept)]).catch((error: unknown) => logger.warn('could not drop old webhook log entries', { error: String(error) }));
  }, CLAIM_SWEEP_MS);
  sweep.unref();

  const cacheOptions = { ttlMs: SETTINGS_TTL_MS, maxEntries: 10_000 };
  const environmentByPublicId = cachedLoader(environmentByPublicIdLoader(bus), cacheOptions);
  const environmentById = cachedLoader((id) => bus.request(gatewayContracts.getEnvironment, { environment_id: id }), cacheOptions);
  const signingKeys = cachedLoader(async (id) => (await bus.request(gatewayContracts.getSigningKeys, { environment_id: id })).keys, cacheOptions);
  const integrations = cachedLoader((key) => {
    const [environment_id, unique_key] = JSON.parse(key) as [string, string];
    return bus.request(vaultWebhookContracts.webhookIntegration, { environment_id, unique_key });
  }, cacheOptions);

  const sender = createWebhookSender({
    policy: createAddressPolicy({ allowCidrs: parseCidrList(config.WEBHOOK_ALLOW_CIDRS) }),
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  });
  const breakers = createCircuitBreakers({ threshold: config.WEBHOOK_BREAKER_THRESHOLD, cooldownMs: config.WEBHOOK_BREAKER_COOLDOWN_MS });
  const authDeps = { bus, environmentById };
  bus.serve(webhookContracts.listInbound, listInboundLogHandler({ inbound }));
  bus.serve(webhookContracts.listAttempts, listAttemptsHandler({ deliveries }));

  // On SIGTERM, deliveries and notices in flight finish while SHUTDOWN_TIMEOUT_MS leaves 3 s for
  // the rest of the shutdown; one still held then (its database or endpoint that slow) goes back
  // to JetStream at once, to be delivered by another replica, as it would after a crash but
  // without waiting out the ack wait (delivery is at least once; receivers deduplicate by id).
  const handBackAfterMs = Math.max(0, config.SHUTDOWN_TIMEOUT_MS - HAND_BACK_WAIT_MS - 2_000);
  const consumers: RunningConsumer[] = [
    // Provider webhooks in batches: a burst is verified, matched to its connections, announced
    // and recorded with a few round trips per batch instead of a few per webhook.
    await consumeBatches({
      bus,
      logger,
      stream: STREAMS.jobs.name,
      durable: 'webhook-router-inbound',
      contract: webhookContracts.inbound,
      batchSize: 256,
      concurrency: 2,
      maxAckPending: 1024,
      // The provider was answered 200: an outage of the vault or the database is waited out.
      maxDeliveries: DAY_OF_DELIVERIES,
      handler: inboundWebhooksHandler({
        bus,
        logger,
        inbound,
        claims,
        environmentByPublicId,
        integration: (environmentId, uniqueKey) => integrations(JSON.stringify([environmentId, uniqueKey])),
      }),
    }),
    await consume({
      bus,
      logger,
      handBackAfterMs,
      stream: STREAMS.jobs.name,
      durable: 'webhook-router-deliveries',
      contract: webhookContracts.deliver,
      concurrency: config.WEBHOOK_CONCURRENCY,
      // Deliveries waiting out a retry delay count as pending: only short ones wait so; longer
      // ones and those an open circuit or a URL's full share of the slots holds are parked
      // (acked), so a broken or slow URL's backlog does not hold up everyone else's webhooks.
      maxAckPending: config.WEBHOOK_MAX_ACK_PENDING,
      ackWaitMs: config.WEBHOOK_TIMEOUT_MS + 5_000,
      // An attempt is acked once its record is stored: a database slower than the ack wait must
      // not make JetStream hand the delivery over again (sent twice) while this replica lives.
      heartbeatMs: Math.floor((config.WEBHOOK_TIMEOUT_MS + 5_000) / 3),
      // The handler schedules its own retries and gives up when the retry window closes; the
      // cap only stops a delivery that keeps failing otherwise (at most one a second).
      maxDeliveries: config.WEBHOOK_RETRY_HOURS * 3600,
      handler: deliverWebhookHandler({
        logger,
        deliveries,
        parked,
        sender,
        breakers,
        destinations: createDestinationSlots({ perUrl: perUrlSlots(config), waitMs: SLOT_WAIT_MS }),
        signingKeys,
        environmentById,
        operations,
        retry: {
          baseMs: config.WEBHOOK_RETRY_BASE_MS,
          capMs: config.WEBHOOK_RETRY_CAP_MS,
          windowMs: config.WEBHOOK_RETRY_HOURS * 3600_000,
          parkAfterMs: config.WEBHOOK_PARK_AFTER_MS,
        },
      }),
    }),
    await consume({
      bus,
      logger,
      handBackAfterMs,
      stream: STREAMS.events.name,
      durable: 'webhook-router-auth-created',
      contract: vaultContracts.connectionCreated,
      concurrency: 8,
      // An event's webhooks wait for the gateway and JOBS (here and below): an outage of an hour
      // must not drop them.
      maxDeliveries: DAY_OF_DELIVERIES,
      handler: connectionCreatedHandler(authDeps),
    }),
    await consume({
      bus,
      logger,
      handBackAfterMs,
      stream: STREAMS.events.name,
      durable: 'webhook-router-auth-refresh-failed',
      contract: vaultContracts.connectionRefreshFailed,
      concurrency: 8,
      maxDeliveries: DAY_OF_DELIVERIES,
      handler: refreshFailedHandler(authDeps),
    }),
    await consume({
      bus,
      logger,
      handBackAfterMs,
      stream: STREAMS.events.name,
      durable: 'webhook-router-async-actions',
      contract: actionContracts.asyncCompleted,
      concurrency: 8,
      maxDeliveries: DAY_OF_DELIVERIES,
      handler: asyncActionCompletedHandler(authDeps),
    }),
    await consume({
      bus,
      logger,
      handBackAfterMs,
      stream: STREAMS.events.name,
      durable: 'webhook-router-sync-completed',
      contract: syncContracts.runCompleted,
      concurrency: 8,
      maxDeliveries: DAY_OF_DELIVERIES,
      handler: syncRunCompletedHandler(authDeps),
    }),
  ];
  // Every replica returns the parked deliveries that are due (each once: see the function).
  const returning = startReturningParked({ logger, parked, deliveries, bus, pollMs: parkPollMs(config) });
  // The job queues of this service (the JOBS stream); the event consumers' backlogs stay small.
  sampleWebhookGauges(bus, ['webhook-router-inbound', 'webhook-router-deliveries'], parked, breakers);

  runtime.onShutdown(async () => {
    clearInterval(sweep);
    await returning.stop();
    await Promise.all(consumers.map((consumer) => consumer.stop()));
    sender.close();
  });
}
