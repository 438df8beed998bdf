import { baseServiceSchema, durationMs, loadConfig, positiveInt } from '@latchkey/config';
import { z } from 'zod';

export const configSchema = baseServiceSchema('webhook-router', 3014).extend({
  /**
   * A delivery is retried for this long after it was made, then given up (recorded as failed).
   * At most a week: the JOBS stream keeps a message for seven days.
   */
  WEBHOOK_RETRY_HOURS: z.coerce.number().positive().max(24 * 7).default(24),
  /** The first retry waits about this long; each next one twice as long (with jitter)… */
  WEBHOOK_RETRY_BASE_MS: durationMs(5_000),
  /** …up to this, whatever the receiver's Retry-After says beyond it. */
  WEBHOOK_RETRY_CAP_MS: durationMs(3_600_000),
  /** One attempt: to the response, body included. */
  WEBHOOK_TIMEOUT_MS: durationMs(10_000),
  /** CIDRs customer webhook URLs may point to although private, loopback…: `10.0.0.0/8,127.0.0.1/32`. */
  WEBHOOK_ALLOW_CIDRS: z.string().default(''),
  /** Consecutive failures of a URL that open its circuit… */
  WEBHOOK_BREAKER_THRESHOLD: positiveInt(5),
  /** …for this long; then one attempt probes it. */
  WEBHOOK_BREAKER_COOLDOWN_MS: durationMs(30_000),
  /** Deliveries in flight per replica. */
  WEBHOOK_CONCURRENCY: positiveInt(64),
  /**
   * Days the inbound log and the delivery attempts are kept (the operator API's lists). Eight at
   * least: a delivery is retried for up to a week, and its attempts say whether it was delivered.
   */
  WEBHOOK_LOG_RETENTION_DAYS: z.coerce.number().int().min(8).max(3650).default(14),
  /**
   * Of those, how many may go to one URL at once (see `perUrlSlots`): a receiver that answers
   * slowly, with a backlog, would otherwise hold them all. Its other deliveries are held, without
   * an attempt: for a moment in memory when the URL answers quickly, else parked.
   */
  WEBHOOK_CONCURRENCY_PER_URL: z.coerce.number().int().min(1).optional(),
  /**
   * A delivery whose next attempt is further off than this (and one its URL's open circuit holds)
   * waits in the router's database, not in JetStream; a parked delivery is attempted at most
   * about half this late.
   */
  WEBHOOK_PARK_AFTER_MS: durationMs(15_000),
  /**
   * Deliveries JetStream hands out and has not had acked yet, all replicas together: those in
   * flight, and those waiting out a retry of at most `WEBHOOK_PARK_AFTER_MS`. Past it, it hands
   * out nothing new until one is acked.
   */
  WEBHOOK_MAX_ACK_PENDING: positiveInt(10_000),
});

export type Config = z.infer<typeof configSchema>;

/**
 * The deliveries one URL may have in flight on a replica: WEBHOOK_CONCURRENCY_PER_URL, by default
 * an eighth of WEBHOOK_CONCURRENCY (8 of 64: it takes eight slow receivers at once to fill a
 * replica, and a quick receiver with a backlog still gets eight webhooks at a time), never more
 * than it, one at least.
 */
export function perUrlSlots(config: Pick<Config, 'WEBHOOK_CONCURRENCY' | 'WEBHOOK_CONCURRENCY_PER_URL'>): number {
  const slots = config.WEBHOOK_CONCURRENCY;
  return Math.max(1, Math.min(slots, config.WEBHOOK_CONCURRENCY_PER_URL ?? Math.floor(slots / 8)));
}

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
