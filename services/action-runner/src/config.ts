import { baseServiceSchema, durationMs, loadConfig, positiveInt, url } from '@latchkey/config';
import { z } from 'zod';

export const configSchema = baseServiceSchema('action-runner', 3013).extend({
  /** Wall clock of one function run, awaits included; past it the isolate is disposed. */
  FUNCTION_TIMEOUT_MS: durationMs(60_000),
  /**
   * Wall clock of one sync run (a sync's `exec`), awaits included: a sync takes as long as its
   * data needs, so it has its own bound, in hours, instead of FUNCTION_TIMEOUT_MS.
   */
  SYNC_TIMEOUT_MS: durationMs(86_400_000),
  /**
   * CPU time one sync run may spend computing (its awaits do not count): a sync mostly waits on
   * its provider, so a run that computes for this long is looping, not syncing.
   */
  SYNC_CPU_TIMEOUT_MS: durationMs(1_800_000),
  /**
   * How often a running sync attempt reports its counts to the sync-scheduler, whether or not it
   * writes: a run that has not reported for the sync-scheduler's SYNC_RUN_STALE_MS (1 h) is taken
   * for lost and its schedule runs again, so keep this well under that.
   */
  SYNC_PROGRESS_INTERVAL_MS: durationMs(300_000),
  /** Heap limit of one run's isolate. */
  FUNCTION_MEMORY_MB: z.coerce.number().int().min(8).max(4096).default(128),
  /**
   * Loaded isolates kept per deployed function between its runs (module-level state survives,
   * as in a warm serverless instance; the context never does). 0: a fresh isolate every run.
   */
  FUNCTION_WARM_ISOLATES: z.coerce.number().int().min(0).max(64).default(2),
  /** Runs one replica executes at once (sync, async, lifecycle and dry runs together). */
  FUNCTION_CONCURRENCY: positiveInt(8),
  /**
   * Of those, how many scheduled sync runs may hold at once (see `syncSlots`): a sync may run for
   * hours, and short work (actions, webhooks, lifecycle functions) must still find a slot.
   */
  SYNC_CONCURRENCY: z.coerce.number().int().min(1).optional(),
  /** How long a replica keeps a deployed function's code; a deploy drops it at once. */
  FUNCTION_CACHE_MS: durationMs(60_000),
  /** One upstream attempt of a ctx.proxy call (as the proxy's own PROXY_TIMEOUT_MS). */
  PROXY_TIMEOUT_MS: durationMs(30_000),
  /** How customers reach the gateway: integration webhook URLs are built from it. */
  PUBLIC_URL: url('http://localhost:3003'),
});

export type Config = z.infer<typeof configSchema>;

/**
 * The run slots scheduled syncs may hold: SYNC_CONCURRENCY, by default three quarters of
 * FUNCTION_CONCURRENCY, never more than it, one at least (with a single slot, syncs share it).
 */
export function syncSlots(config: Pick<Config, 'FUNCTION_CONCURRENCY' | 'SYNC_CONCURRENCY'>): number {
  const slots = config.FUNCTION_CONCURRENCY;
  return Math.max(1, Math.min(slots, config.SYNC_CONCURRENCY ?? slots - Math.max(1, Math.floor(slots / 4))));
}

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
