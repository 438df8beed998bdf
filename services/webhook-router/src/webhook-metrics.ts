import type { Bus } from '@latchkey/bus';
import { STREAMS } from '@latchkey/contracts';
import { counter, onScrape } from '@latchkey/metrics';
import type { InboundWebhookRepo } from './db/inbound-webhook-repo.js';
import type { ParkedDeliveryRepo } from './db/parked-delivery-repo.js';
import type { CircuitBreakers } from './domain/circuit-breaker.js';

const inbound = counter('latchkey_webhooks_inbound_total');
const deliveries = counter('latchkey_webhook_deliveries_total');
const attempts = counter('latchkey_webhook_delivery_attempts_total');

/** What became of a delivery job this time: `delivered`, `failed` (for good), `retrying`, or `held` by an open circuit or its URL's full share of the slots. */
export const countDelivery = (outcome: 'delivered' | 'failed' | 'retrying' | 'held'): void => deliveries.inc({ outcome });
export const countAttempt = (): void => attempts.inc();

/** Counts each provider webhook by the status it is recorded with (forwarded, not_forwarded, rejected). */
export function countingInbound(repo: InboundWebhookRepo): InboundWebhookRepo {
  return {
    ...repo,
    record: (environment, doc) => repo.record(environment, doc).then(() => inbound.inc({ outcome: doc.status })),
    recordUnscoped: (doc) => repo.recordUnscoped(doc).then(() => inbound.inc({ outcome: doc.status })),
  };
}

/**
 * Samples at scrape: each durable's pending messages (JetStream's num_pending, by durable name:
 * a fixed list), the deliveries parked in the database, and how many customer URLs' circuits
 * this replica has in each state.
 */
export function sampleWebhookGauges(
  bus: Bus,
  durables: readonly string[],
  parked: Pick<ParkedDeliveryRepo, 'countParked'>,
  breakers: CircuitBreakers,
): void {
  onScrape('latchkey_webhook_backlog', async (gauge) => {
    const jsm = await bus.jetstreamManager();
    await Promise.all(
      durables.map(async (durable) => {
        const info = await jsm.consumers.info(STREAMS.jobs.name, durable);
        gauge.set({ queue: durable }, info.num_pending);
      }),
    );
  });
  onScrape('latchkey_webhook_parked', async (gauge) => gauge.set(await parked.countParked()));
  onScrape('latchkey_webhook_breaker_state', (gauge) => {
    const states = breakers.states();
    gauge.set({ state: 'open' }, states.open);
    gauge.set({ state: 'half_open' }, states.halfOpen);
    gauge.set({ state: 'failing' }, states.failing);
  });
}
