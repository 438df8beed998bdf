import type { Bus } from '@latchkey/bus';
import { webhookContracts, webhookDelivery, type WebhookDelivery } from '@latchkey/contracts';
import { toAppError, type AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import { repeatEvery } from '@latchkey/runtime';
import type { DeliveryRepo } from '../db/delivery-repo.js';
import type { ParkedDeliveryDoc } from '../db/parked-delivery-model.js';
import type { ParkedDeliveryRepo } from '../db/parked-delivery-repo.js';
import { countDelivery } from '../webhook-metrics.js';

export interface ReturnParkedDeps {
  logger: Logger;
  parked: Pick<ParkedDeliveryRepo, 'dueCollections' | 'deliveriesDueBy' | 'release' | 'dropIfDone'>;
  /** Where a parked delivery that can never go back on JOBS is recorded failed, as every delivery given up is. */
  deliveries: Pick<DeliveryRepo, 'recordAttempt'>;
  bus: Pick<Bus, 'enqueue'>;
  pollMs: number;
}

/** Parked deliveries read, and put back on JOBS, at a time. */
const BATCH = 64;

/**
 * Every `pollMs`, on every replica: the parked deliveries now due go back on JOBS, for the
 * deliveries consumer to attempt, and their waits end. Each goes under its wait's id as
 * `Nats-Msg-Id`, so replicas that return the same delivery at once make one message, and its
 * wait ends (by `_id`) only once JetStream stored it: a replica that dies midway leaves the rest
 * to the next poll. One that JOBS refuses for good (its message no longer passes the contract or
 * no longer fits the bus, after an upgrade) is given up, and a collection that cannot be returned
 * now (JOBS full, NATS away) is tried again at the next poll after the others: neither holds back
 * every other parked delivery. Returns a stop function, which lets the poll in progress finish.
 */
export function startReturningParked(deps: ReturnParkedDeps): { stop(): Promise<void> } {
  let stopped = false;
  let failures = 0;

  async function returnDueBy(by: number): Promise<void> {
    for await (const batch of deps.parked.deliveriesDueBy(by, BATCH)) {
      const enqueued = await Promise.allSettled(batch.map((doc) => deps.bus.enqueue(webhookContracts.deliver, doc.job, { msgId: doc._id })));
      await deps.parked.release(
        by,
        batch.filter((_, index) => enqueued[index]!.status === 'fulfilled').map((doc) => doc._id),
      );
      const refused = batch.flatMap((doc, index) => {
        const outcome = enqueued[index]!;
        return outcome.status === 'rejected' ? [{ doc, error: toAppError(outcome.reason) }] : [];
      });
      const final = refused.filter(({ error }) => !error.retryable);
      if (final.length > 0) {
        await Promise.all(final.map(({ doc, error }) => giveUp(deps, doc, error)));
        await deps.parked.release(by, final.map(({ doc }) => doc._id));
      }
      const later = refused.find(({ error }) => error.retryable);
      if (later) throw later.error;
      if (stopped) return;
    }
    await deps.parked.dropIfDone(by, new Date());
  }

  async function poll(): Promise<void> {
    let failed: { error: unknown } | undefined;
    for (const by of await deps.parked.dueCollections(new Date())) {
      if (stopped) break;
      await returnDueBy(by).catch((error: unknown) => {
        failed ??= { error };
      });
    }
    if (failed) throw failed.error;
  }

  // A long poll (a large backlog due at once) is not stacked upon: the next starts after it.
  const polling = repeatEvery(
    deps.pollMs,
    async () => {
      await poll();
      failures = 0;
    },
    (error) => {
      // The database or JetStream away: the next poll tries again; said once, then every 60th time.
      failures += 1;
      if (failures === 1 || failures % 60 === 0) deps.logger.warn('could not return parked webhook deliveries; retrying', { failures, error });
    },
  );

  return {
    async stop() {
      stopped = true;
      await polling.stop();
    },
  };
}

/** The error a delivery given up on its way back from the park is recorded with (nothing was sent). */
const REQUEUE_FAILED = 'requeue_failed';

/**
 * Gives up a parked delivery that JOBS refuses for good: logged, counted failed, and recorded
 * `failed` (`requeue_failed`, status null, as the attempt it would have been) when its stored
 * message still says which delivery it is. Nothing was sent.
 */
async function giveUp(deps: Pick<ReturnParkedDeps, 'logger' | 'deliveries'>, doc: ParkedDeliveryDoc, error: AppError): Promise<void> {
  deps.logger.error('a parked webhook delivery cannot go back on JOBS; given up', { parked_id: doc._id, code: error.code, error: error.cause ?? error });
  const job = webhookDelivery.pick({ webhook_id: true, target: true, kind: true, url: true, created_at: true, attempts: true }).safeParse(doc.job);
  if (job.success && !Number.isNaN(Date.parse(job.data.created_at))) await recordGivenUp(deps, doc.environment_id, job.data);
  countDelivery('failed');
}

/** The attempt it would have been, recorded `failed` with nothing sent. */
function recordGivenUp(
  deps: Pick<ReturnParkedDeps, 'deliveries'>,
  environment: string,
  job: Pick<WebhookDelivery, 'webhook_id' | 'target' | 'kind' | 'url' | 'created_at' | 'attempts'>,
): Promise<void> {
  const { webhook_id, target, kind, url, created_at, attempts } = job;
  const at = new Date();
  return deps.deliveries.recordAttempt(environmentId(environment), {
    delivery: `${webhook_id}:${target}`,
    webhook_id,
    target,
    kind,
    created_at: new Date(created_at),
    attempt: (attempts ?? 0) + 1,
    url,
    status: null,
    error: REQUEUE_FAILED,
    duration_ms: 0,
    outcome: 'failed',
    next_attempt_at: null,
    at,
  });
}
