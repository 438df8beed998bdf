import { baseServiceSchema, durationMs, loadConfig, positiveInt } from '@latchkey/config';
import type { z } from 'zod';

export const configSchema = baseServiceSchema('sync-scheduler', 3012).extend({
  /** The largest deployment (all of one integration's bundles, as JSON) accepted. */
  MAX_DEPLOYMENT_BYTES: positiveInt(20 * 1024 * 1024),
  /** How often the lease holder looks for due schedules (and every replica renews or tries the lease). */
  SCHEDULER_TICK_MS: durationMs(1000),
  /**
   * How often the lease holder reads every schedule again into its due index (it also does when
   * it starts leading and after a NATS reconnection; between, the index follows the replicas'
   * `sync.schedule.changed` broadcasts): the longest a schedule can wait should one be lost.
   */
  SCHEDULER_RESCAN_MS: durationMs(600_000),
  /** The scheduler lease's TTL: a dead holder is replaced after at most this long plus one tick. */
  SCHEDULER_LEASE_MS: durationMs(6000),
  /** The shortest sync frequency accepted (one minute; tests lower it to run schedules in seconds). */
  SYNC_MIN_FREQUENCY_MS: durationMs(60_000),
  /** A run that has not reported back after this long is taken to be lost, and its schedule runs again. */
  SYNC_RUN_STALE_MS: durationMs(3_600_000),
  /**
   * A run not begun this long after it was claimed (its job was never queued: the claiming replica
   * died, or the publish was lost) is taken to be lost: the schedule is not held for an hour.
   */
  SYNC_RUN_UNSTARTED_MS: durationMs(120_000),
});

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
