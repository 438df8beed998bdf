import type { JobMessage, OperationLog } from '@latchkey/bus';
import type { WebhookDelivery } from '@latchkey/contracts';
import { withRetries } from '@latchkey/errors';
import { currentRequestId, type Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import { inSpan, setSpanAttributes, SpanKind, tracingEnabled } from '@latchkey/tracing';
import type { DeliveryRepo } from '../db/delivery-repo.js';
import type { CircuitBreakers } from '../domain/circuit-breaker.js';
import { isRetryableStatus, nextRetryDelay, parseRetryAfter } from '../domain/retry-policy.js';
import { signatureHeaders, type SendResult, type WebhookSender } from '../delivery/send-webhook.js';
import { countAttempt, countDelivery } from '../webhook-metrics.js';

export interface DeliverDeps {
  logger: Logger;
  deliveries: Pick<DeliveryRepo, 'recordAttempt' | 'wasDelivered'>;
  sender: Pick<WebhookSender, 'send'>;
  breakers: CircuitBreakers;
  /** The environment's signing secrets, newest first (two during a rotation's overlap). */
  signingKeys(environmentId: string): Promise<string[]>;
  retry: { baseMs: number; capMs: number; windowMs: number };
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

/**
 * One attempt at one delivery. A redelivery of one already delivered acks without sending. Success (2xx) acks. Network errors, timeouts, 5xx, 408 and 429
 * come back after a back-off (Retry-After honoured) until the retry window closes; any other
 * answer, or a URL the SSRF rules refuse, is final. Every attempt is recorded. While a URL's
 * circuit is open its deliveries wait without an attempt.
 */
export function deliverWebhookHandler(deps: DeliverDeps) {
  return async (job: WebhookDelivery, msg: JobMessage): Promise<void | { retryInMs: number }> => {
    const scope = environmentId(job.environment_id);
    const deliveryId = `${job.webhook_id}:${job.target}`;
    const createdAt = new Date(job.created_at);

    // Handed over again: its last holder may have delivered it and lost the ack (its NATS node
    // died, or the process right after recording). The customer gets each webhook-id once.
    if (msg.info.deliveryCount > 1 && (await deps.deliveries.wasDelivered(scope, deliveryId, msg.info.deliveryCount))) {
      deps.logger.info('webhook delivered before its redelivery; not sending it again', { webhook_id: job.webhook_id, target: job.target });
      return;
    }

    // An open circuit holds the delivery without an attempt, unless the wait would outlast the
    // retry window: then it gets its last attempt now.
    const wait = deps.breakers.waitFor(job.url);
    if (wait > 0 && Date.now() + wait <= createdAt.getTime() + deps.retry.windowMs) {
      countDelivery('held');
      return { retryInMs: wait };
    }

    const at = new Date();
    let result: SendResult;
    try {
      const keys = await deps.signingKeys(job.environment_id);
      const send = () => deps.sender.send(job.url, signatureHeaders({ webhookId: job.webhook_id, at, body: job.body, keys }), job.body);
      result = await (tracingEnabled() ? tracedSend(job.url, msg.info.deliveryCount, send) : send());
    } catch (error) {
      // A probe that never went must not hold the URL's other deliveries until the window ends.
      deps.breakers.settled(job.url);
      throw error;
    }
    recordAttempt(deps, job, at, result);
    countAttempt();
    const attempt = {
      delivery: deliveryId,
      webhook_id: job.webhook_id,
      target: job.target,
      kind: job.kind,
      created_at: createdAt,
      attempt: msg.info.deliveryCount,
      url: job.url,
      status: result.status,
      error: result.error,
      duration_ms: result.durationMs,
      at,
    };

    const retryable = result.status === null ? result.error !== 'upstream_not_allowed' && result.error !== 'invalid_url' : isRetryableStatus(result.status);
    // Every attempt ends its probe: a failure reopens the circuit, any other answer (a success,
    // or the receiver refusing this webhook for good) shows the URL up, and a refusal of ours
    // says nothing of it.
    if (retryable) deps.breakers.failed(job.url);
    else if (result.status !== null) deps.breakers.answered(job.url);
    else deps.breakers.settled(job.url);

    if (result.status !== null && result.status >= 200 && result.status < 300) {
      await recordDelivered(deps, job, () => deps.deliveries.recordAttempt(scope, { ...attempt, outcome: 'delivered', next_attempt_at: null }));
      countDelivery('delivered');
      return;
    }
    const delay = retryable
      ? nextRetryDelay({
          attempt: msg.info.deliveryCount,
          retryAfterMs: parseRetryAfter(result.retryAfter, Date.now()),
          createdAt: createdAt.getTime(),
          now: Date.now(),
          ...deps.retry,
        })
      : null;
    if (delay === null) {
      deps.logger.warn('webhook delivery failed for good', { webhook_id: job.webhook_id, target: job.target, status: result.status, error: result.error });
      await deps.deliveries.recordAttempt(scope, { ...attempt, outcome: 'failed', next_attempt_at: null });
      countDelivery('failed');
      return;
    }
    await deps.deliveries.recordAttempt(scope, { ...attempt, outcome: 'retrying', next_attempt_at: new Date(Date.now() + delay) });
    countDelivery('retrying');
    return { retryInMs: delay };
  };
}

/** How long the record of a delivered attempt is tried again (the database away) before the delivery is acked without it. */
const DELIVERED_RECORD_MS = 30_000;

/**
 * Records an attempt the receiver took. Failing here would hand the delivery back, and, no
 * record saying it was delivered, it would be sent again: so the record is tried again with
 * back-off while the database is away (a restart, a failover), the consumer's heartbeat keeping
 * the message, and past `DELIVERED_RECORD_MS` the delivery is acked without it (logged): the
 * receiver has it once, and only the attempts list misses it.
 */
async function recordDelivered(deps: Pick<DeliverDeps, 'logger'>, job: WebhookDelivery, record: () => Promise<unknown>): Promise<void> {
  await withRetries(record, { forMs: DELIVERED_RECORD_MS, firstDelayMs: 250, maxDelayMs: 4_000 }).catch((error: unknown) => {
    deps.logger.error('webhook delivered, but its attempt could not be recorded; not sending it again', { webhook_id: job.webhook_id, target: job.target, error });
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
