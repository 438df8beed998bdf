import type { JobMessage, OperationLog } from '@latchkey/bus';
import type { EnvironmentInfo, WebhookDelivery } from '@latchkey/contracts';
import { withRetries } from '@latchkey/errors';
import { currentRequestId, type Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import { inSpan, setSpanAttributes, SpanKind, tracingEnabled } from '@latchkey/tracing';
import type { DeliveryRepo } from '../db/delivery-repo.js';
import { parkedDeliveryId } from '../db/parked-delivery-model.js';
import type { ParkedDeliveryRepo } from '../db/parked-delivery-repo.js';
import type { CircuitBreakers } from '../domain/circuit-breaker.js';
import type { DestinationSlots } from '../domain/destination-slots.js';
import { targetUrl } from '../domain/enqueue-deliveries.js';
import { isRetryableStatus, nextHoldDelay, nextRetryDelay, parseRetryAfter } from '../domain/retry-policy.js';
import { signatureHeaders, type SendResult, type WebhookSender } from '../delivery/send-webhook.js';
import { countAttempt, countDelivery } from '../webhook-metrics.js';

export interface DeliverDeps {
  logger: Logger;
  deliveries: Pick<DeliveryRepo, 'recordAttempt' | 'wasDelivered'>;
  /** Where a delivery waits when its next attempt is far off (`retry.parkAfterMs`) or its URL's circuit is open. */
  parked: Pick<ParkedDeliveryRepo, 'park' | 'wasParked'>;
  sender: Pick<WebhookSender, 'send'>;
  breakers: CircuitBreakers;
  /** Deliveries in flight per URL on this replica: each URL's share of the slots at most. */
  destinations: Pick<DestinationSlots, 'take'>;
  /** The environment's signing secrets, newest first (two during a rotation's overlap). */
  signingKeys(environmentId: string): Promise<string[]>;
  /** The environment's settings as they are now (kept briefly): where each target's webhooks go. */
  environmentById(environmentId: string): Promise<Pick<EnvironmentInfo, 'webhook_url' | 'webhook_url_secondary'>>;
  /** Back-off, retry window, and the longest wait left to JetStream (a longer one is parked). */
  retry: { baseMs: number; capMs: number; windowMs: number; parkAfterMs: number };
  /** The operations log: one `webhook_outbound` per attempt (never its URL or body). */
  operations: Pick<OperationLog, 'record'>;
}

function recordAttempt(deps: Pick<DeliverDeps, 'operations'>, job: WebhookDelivery, at: Date, result: { status: number | null; error: string | null; durationMs: number }): void {
  const delivered = result.status !== null && result.status >= 200 && result.status < 300;
  const requestId = currentRequestId();
  const error = delivered
    ? undefined
    : result.status === null
      ? { code: (result.error ?? 'network_error').slice(0, 64), message: 'The webhook could not be delivered' }
      : { code: 'webhook_rejected', message: `The webhook URL answered ${result.status}` };
  deps.operations.record({
    type: 'webhook_outbound',
    environment_id: job.environment_id,
    status: delivered ? 'success' : 'failure',
    started_at: at.toISOString(),
    duration_ms: Math.max(0, Math.round(result.durationMs)),
    ...(requestId === undefined ? {} : { request_id: requestId }),
    ...(error ? { error } : {}),
  });
}

/** A delivery's id: its webhook-id and target (one webhook may go to both URLs). */
const deliveryIdOf = (job: WebhookDelivery) => `${job.webhook_id}:${job.target}`;

/** The stored record of one attempt (its outcome added by the caller). */
function attemptRecord(job: WebhookDelivery, attempt: number, url: string, at: Date, result: Pick<SendResult, 'status' | 'error' | 'durationMs'>) {
  return {
    delivery: deliveryIdOf(job),
    webhook_id: job.webhook_id,
    target: job.target,
    kind: job.kind,
    created_at: new Date(job.created_at),
    attempt,
    url,
    status: result.status,
    error: result.error,
    duration_ms: result.durationMs,
    at,
  };
}

/**
 * One attempt at one delivery, to the URL its environment has for its target now. A delivery
 * already delivered (its ack lost, or made again after JetStream forgot the first copy) acks
 * without sending; one whose target URL was removed is recorded failed without sending. Success
 * (2xx) acks. Network errors, timeouts, 5xx, 408 and 429 come back after a back-off (Retry-After
 * honoured) until the retry window closes; any other answer, or a URL the SSRF rules refuse, is
 * final. Every attempt is recorded. While a URL's circuit is open, or its share of this
 * replica's deliveries is in flight, its other deliveries wait without an attempt.
 *
 * A wait longer than `retry.parkAfterMs`, and every wait for an open circuit or a busy URL
 * (beyond the moment a quick URL's delivery may wait for a slot in memory), is spent parked in
 * the database, not in JetStream, where a waiting message keeps a place among those the consumer
 * may have pending: one URL's backlog would stop everyone's deliveries. So every delivery of a
 * message is an attempt, and the attempt's number is the attempts made before the message (it
 * carries them when it comes back from the park) plus its delivery count.
 */
export function deliverWebhookHandler(deps: DeliverDeps) {
  return async (job: WebhookDelivery, msg: JobMessage): Promise<void | { retryInMs: number }> => {
    const scope = environmentId(job.environment_id);
    const deliveryId = deliveryIdOf(job);
    const createdAt = new Date(job.created_at);
    const attempt = (job.attempts ?? 0) + msg.info.deliveryCount;

    // Its last holder may have delivered it and lost the ack (its NATS node died, or the process
    // right after recording), or it was made again past JetStream's duplicate window: once its
    // delivered attempt is stored, the customer does not get it again. For a first attempt, one
    // lookup by `_id`.
    if (await deps.deliveries.wasDelivered(scope, deliveryId, attempt)) {
      deps.logger.info('webhook delivered already; not sending it again', { webhook_id: job.webhook_id, target: job.target });
      return;
    }
    // Handed over again after it was parked (its ack lost): the parked delivery goes on from there.
    if (msg.info.deliveryCount > 1 && (await deps.parked.wasParked(parkedDeliveryId(deliveryId, nextRevision(job))))) {
      deps.logger.info('webhook delivery parked already; not sending it again', { webhook_id: job.webhook_id, target: job.target });
      return;
    }

    const url = targetUrl(await deps.environmentById(job.environment_id), job.target);
    if (url === null) {
      await recordNotSent(deps, job, attempt);
      return;
    }

    // An open circuit, or a URL with its share of this replica's deliveries in flight (a
    // receiver answering slowly, with a backlog), holds the delivery without an attempt, unless
    // the wait would outlast the retry window: then it gets its last attempt now. Held again and
    // again, it waits longer each time, so a long backlog is not read over and over.
    const holdFor = (circuitWaitMs: number) =>
      nextHoldDelay({ holds: (job.holds ?? 0) + 1, circuitWaitMs, createdAt: createdAt.getTime(), now: Date.now(), ...deps.retry });
    const wait = deps.breakers.waitFor(url);
    let hold = wait > 0 ? holdFor(wait) : null;
    const slot = hold === null ? await deps.destinations.take(url) : null;
    if (hold === null && slot === null) {
      hold = holdFor(0);
      // Not sent: had the circuit let this delivery probe the URL, the next one does.
      if (hold !== null) deps.breakers.settled(url);
    }
    if (hold !== null) {
      await park(deps, job, { attempts: attempt - 1, holds: (job.holds ?? 0) + 1 }, hold);
      countDelivery('held');
      return;
    }

    const at = new Date();
    let result: SendResult;
    try {
      const keys = await deps.signingKeys(job.environment_id);
      const send = () => deps.sender.send(url, signatureHeaders({ webhookId: job.webhook_id, at, body: job.body, keys }), job.body);
      result = await (tracingEnabled() ? tracedSend(url, attempt, send) : send());
    } catch (error) {
      // A probe that never went must not hold the URL's other deliveries until the window ends.
      deps.breakers.settled(url);
      throw error;
    } finally {
      slot?.release();
    }
    recordAttempt(deps, job, at, result);
    countAttempt();
    const record = attemptRecord(job, attempt, url, at, result);

    const retryable = result.status === null ? result.error !== 'upstream_not_allowed' && result.error !== 'invalid_url' : isRetryableStatus(result.status);
    // Every attempt ends its probe: a failure reopens the circuit, any other answer (a success,
    // or the receiver refusing this webhook for good) shows the URL up, and a refusal of ours
    // says nothing of it.
    if (retryable) deps.breakers.failed(url);
    else if (result.status !== null) deps.breakers.answered(url);
    else deps.breakers.settled(url);

    if (result.status !== null && result.status >= 200 && result.status < 300) {
      await recordFinal(deps, job, 'delivered', () => deps.deliveries.recordAttempt(scope, { ...record, outcome: 'delivered', next_attempt_at: null }));
      countDelivery('delivered');
      return;
    }
    const delay = retryable
      ? nextRetryDelay({
          attempt,
          retryAfterMs: parseRetryAfter(result.retryAfter, Date.now()),
          createdAt: createdAt.getTime(),
          now: Date.now(),
          ...deps.retry,
        })
      : null;
    if (delay === null) {
      deps.logger.warn('webhook delivery failed for good', { webhook_id: job.webhook_id, target: job.target, status: result.status, error: result.error });
      await recordFinal(deps, job, 'failed', () => deps.deliveries.recordAttempt(scope, { ...record, outcome: 'failed', next_attempt_at: null }));
      countDelivery('failed');
      return;
    }
    await deps.deliveries.recordAttempt(scope, { ...record, outcome: 'retrying', next_attempt_at: new Date(Date.now() + delay) });
    countDelivery('retrying');
    if (delay <= deps.retry.parkAfterMs) return { retryInMs: delay };
    await park(deps, job, { attempts: attempt, holds: 0 }, delay);
  };
}

/** The revision the delivery comes back as when this message parks it. */
const nextRevision = (job: WebhookDelivery) => (job.revision ?? 0) + 1;

/**
 * Parks the delivery for `delayMs` (acked once stored): it comes back as its next revision,
 * carrying the attempts made so far and the holds in a row. Its wait's id follows from the
 * message it leaves, so a copy of that message handed over again finds it parked.
 */
async function park(deps: Pick<DeliverDeps, 'parked'>, job: WebhookDelivery, counts: { attempts: number; holds: number }, delayMs: number): Promise<void> {
  const revision = nextRevision(job);
  await deps.parked.park(environmentId(job.environment_id), {
    id: parkedDeliveryId(deliveryIdOf(job), revision),
    dueAt: new Date(Date.now() + delayMs),
    job: { ...job, ...counts, revision },
  });
}

/**
 * A delivery whose target URL was removed from its environment since it was made: nothing is
 * sent, and it is recorded failed (`webhook_url_removed`, with the URL it was made for), so the
 * attempts list says where it ended.
 */
async function recordNotSent(deps: Pick<DeliverDeps, 'deliveries' | 'logger'>, job: WebhookDelivery, attempt: number): Promise<void> {
  deps.logger.info('webhook URL removed; the delivery is given up', { webhook_id: job.webhook_id, target: job.target });
  const record = attemptRecord(job, attempt, job.url, new Date(), { status: null, error: 'webhook_url_removed', durationMs: 0 });
  await deps.deliveries.recordAttempt(environmentId(job.environment_id), { ...record, outcome: 'failed', next_attempt_at: null });
  countDelivery('failed');
}

/** How long the record of an attempt that ended its delivery is tried again (the database away) before the delivery is acked without it. */
const FINAL_RECORD_MS = 30_000;

/**
 * Records the attempt that ended a delivery: the receiver took it, or it failed for good (the
 * receiver refused it, or its retry window closed). Failing here would hand the delivery back,
 * and, only a delivered record stopping a delivery before it sends, it would be sent again: a
 * refused webhook as often as the database refuses writes, for up to a week. So the record is
 * tried again with back-off while the database is away (a restart, a failover), the consumer's
 * heartbeat keeping the message, and past `FINAL_RECORD_MS` the delivery is acked without it
 * (logged): the receiver has had it once, and the attempts list misses it. So does the check
 * before a send: should the same delivery be made again past JetStream's duplicate window (its
 * inbound batch redelivered after a longer outage), the receiver gets it again, same webhook-id.
 */
async function recordFinal(deps: Pick<DeliverDeps, 'logger'>, job: WebhookDelivery, outcome: 'delivered' | 'failed', record: () => Promise<unknown>): Promise<void> {
  await withRetries(record, { forMs: FINAL_RECORD_MS, firstDelayMs: 250, maxDelayMs: 4_000 }).catch((error: unknown) => {
    deps.logger.error(`webhook ${outcome === 'delivered' ? 'delivered' : 'delivery failed for good'}, but its attempt could not be recorded; not sending it again`, {
      webhook_id: job.webhook_id,
      target: job.target,
      error,
    });
  });
}

/** One delivery attempt as a client span: the receiver's host and the status, never the URL's path or query. */
function tracedSend<R extends { status: number | null }>(url: string, attempt: number, send: () => Promise<R>): Promise<R> {
  let host: URL | undefined;
  try {
    host = new URL(url);
  } catch {
    host = undefined;
  }
  const attributes = {
    'http.request.method': 'POST',
    'latchkey.attempt': attempt,
    ...(host ? { 'server.address': host.hostname, 'url.scheme': host.protocol.slice(0, -1) } : {}),
  };
  return inSpan('webhook delivery POST', { kind: SpanKind.CLIENT, attributes }, async () => {
    const result = await send();
    if (result.status !== null) setSpanAttributes({ 'http.response.status_code': result.status });
    return result;
  });
}
