import { z } from 'zod';
import { defineBroadcast, defineEvent, defineJob, defineRequest } from './define.js';
import { runAttempt } from './records.js';

/**
 * Sync runs. The sync-scheduler owns schedules and runs: it enqueues `jobs.sync.run`, the
 * action-runner claims the run (`sync.run.begin`), runs the deployed sync's `exec` with the
 * connection, writes records through `records.write`, and reports the outcome
 * (`sync.run.finish`); the scheduler records it and emits `sync.run.completed` / `sync.run.failed`.
 */

const environment_id = z.string().min(1);
const provider_config_key = z.string().min(1).max(128);
const connection_id = z.string().min(1).max(255);
const syncName = z.string().min(1).max(100);
const variant = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or - (64 at most)');

export const SYNC_RUN_STATUSES = ['SUCCESS', 'ERROR'] as const;
export const SYNC_STATUSES = ['RUNNING', 'PAUSED', 'SUCCESS', 'ERROR', 'STOPPED'] as const;

/** What a run changed, per model. */
export const modelCounts = z.record(z.string(), z.object({ added: z.number().int(), updated: z.number().int(), deleted: z.number().int() }));
export type ModelCounts = z.infer<typeof modelCounts>;

/** A checkpoint's JSON, in bytes: a cursor, a page, a timestamp, not a data store. */
export const MAX_CHECKPOINT_BYTES = 65_536;

/**
 * Where a sync got to, as the function said (`ctx.saveCheckpoint`): a JSON object, kept per
 * environment, integration, connection, sync and variant until the function clears it or a full
 * resync starts over.
 */
export const syncCheckpoint = z
  .record(z.string(), z.unknown())
  .refine((value) => new TextEncoder().encode(JSON.stringify(value)).length <= MAX_CHECKPOINT_BYTES, `a checkpoint is at most ${MAX_CHECKPOINT_BYTES} bytes of JSON`);
export type SyncCheckpoint = z.infer<typeof syncCheckpoint>;

const runEvent = z.object({
  environment_id: z.string(),
  run_id: z.string(),
  provider_config_key: z.string(),
  connection_id: z.string(),
  sync_name: z.string(),
  variant: z.string(),
  results: modelCounts,
  started_at: z.string(),
  finished_at: z.string(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

const target = { environment_id, provider_config_key, syncs: z.array(syncName).max(100), connection_id: connection_id.optional() };

export const syncStatusEntry = z.object({
  id: z.string(),
  connection_id: z.string(),
  name: z.string(),
  variant: z.string(),
  status: z.enum(SYNC_STATUSES),
  type: z.enum(['INCREMENTAL', 'FULL']),
  frequency: z.string(),
  finishedAt: z.string().nullable(),
  nextScheduledSyncAt: z.string().nullable(),
  latestResult: modelCounts,
  recordCount: z.record(z.string(), z.number().int()),
  latestError: z.object({ code: z.string(), message: z.string() }).nullable(),
  /** The run in flight: when it started and what it wrote so far; null when none runs. */
  progress: z.object({ startedAt: z.string().nullable(), records: z.number().int(), results: modelCounts }).nullable(),
});
export type SyncStatusEntry = z.infer<typeof syncStatusEntry>;

/**
 * The leader's last scheduler tick, as it wrote it into the lease: when it began, how long it
 * took, how long finding the due schedules took, how many it read and how many runs it queued.
 */
export const schedulerTick = z.object({
  at: z.string(),
  duration_ms: z.number(),
  due_query_ms: z.number(),
  read: z.number().int(),
  queued: z.number().int(),
});
export type SchedulerTick = z.infer<typeof schedulerTick>;

export const syncContracts = {
  /** One queued run; its details live in the scheduler's `sync_runs`. */
  run: defineJob('sync.run', z.object({ environment_id: z.string(), run_id: z.string() })),
  /**
   * The action-runner claims a queued run: the answer says what to run, or `run: null` when the
   * run already finished (a redelivered job) and must not run again.
   */
  beginRun: defineRequest(
    'sync.run.begin',
    z.object({ environment_id, run_id: z.string().min(1) }),
    z.object({
      run: z
        .object({
          provider_config_key: z.string(),
          connection_id: z.string(),
          sync_name: z.string(),
          variant: z.string(),
          started_at: z.string(),
          /** The last checkpoint saved for this sync, connection and variant (by this run, an earlier attempt of it, or an earlier run). */
          checkpoint: syncCheckpoint.nullable().optional(),
          /** What earlier attempts of this run reported writing (a cut-off one, whose writes the resumed one finds unchanged). */
          results: modelCounts.optional(),
          /**
           * This attempt's number: each claim of the run counts one more. The attempt's writes,
           * progress and end carry it, and are refused once a later attempt began (the earlier
           * one may still be going: its message came back to another replica while it ran).
           */
          attempt: runAttempt.optional(),
        })
        .nullable(),
    }),
  ),
  /**
   * A run in flight reports what it wrote so far, and saves (an object) or clears (null) its
   * checkpoint when `checkpoint` is present. `recorded: false`: the run is over (finished, or
   * abandoned for another) and nothing was kept.
   */
  reportProgress: defineRequest(
    'sync.run.progress',
    z.object({ environment_id, run_id: z.string().min(1), attempt: runAttempt.optional(), results: modelCounts, checkpoint: syncCheckpoint.nullable().optional() }),
    z.object({ recorded: z.boolean() }),
  ),
  /** The outcome of a run; the first outcome wins, and an attempt that a later one replaced has none. */
  finishRun: defineRequest(
    'sync.run.finish',
    z.object({
      environment_id,
      run_id: z.string().min(1),
      attempt: runAttempt.optional(),
      status: z.enum(SYNC_RUN_STATUSES),
      results: modelCounts,
      error: z.object({ code: z.string(), message: z.string().max(2000) }).optional(),
    }),
    z.object({ recorded: z.boolean() }),
  ),
  /**
   * A sync's `onWebhook` ran for a provider webhook: the scheduler announces it as a run of the
   * sync's `base` variant (`sync.run.completed` / `failed`, once per `run_id`), so changed
   * records send the `sync` webhook and a failure shows on the connection, as after `exec`.
   */
  webhookRunFinished: defineRequest(
    'sync.webhook_run.finish',
    z.object({
      environment_id,
      run_id: z.string().min(1).max(200),
      provider_config_key,
      connection_id,
      sync_name: syncName,
      started_at: z.string(),
      status: z.enum(SYNC_RUN_STATUSES),
      results: modelCounts,
      error: z.object({ code: z.string(), message: z.string().max(2000) }).optional(),
    }),
    z.object({ published: z.literal(true) }),
  ),
  /** `POST /sync/trigger`: one run now of each named sync (all when empty) for one or all connections. */
  trigger: defineRequest(
    'sync.trigger',
    z.object({
      ...target,
      variant: variant.optional(),
      /** The records and the checkpoint are cleared first (`full_refresh_and_clear_cache`, `full_resync`). */
      full_resync: z.boolean(),
      /** The checkpoint only is cleared first, the records kept (`full_refresh`). */
      reset_checkpoint: z.boolean().optional(),
    }),
    z.object({ queued: z.number().int() }),
  ),
  /** `POST /sync/start` and `/sync/pause`. */
  setPaused: defineRequest('sync.paused.set', z.object({ ...target, paused: z.boolean() }), z.object({ changed: z.number().int() })),
  status: defineRequest('sync.status', z.object(target), z.object({ syncs: z.array(syncStatusEntry) })),
  updateFrequency: defineRequest(
    'sync.frequency.update',
    z.object({ environment_id, provider_config_key, connection_id, sync_name: syncName, variant, frequency: z.string().min(1).max(100).nullable() }),
    z.object({ frequency: z.string() }),
  ),
  createVariant: defineRequest(
    'sync.variant.create',
    z.object({ environment_id, provider_config_key, connection_id, sync_name: syncName, variant }),
    z.object({ id: z.string(), name: z.string(), variant: z.string() }),
  ),
  deleteVariant: defineRequest(
    'sync.variant.delete',
    z.object({ environment_id, provider_config_key, connection_id, sync_name: syncName, variant }),
    z.object({ success: z.literal(true) }),
  ),
  /** A run finished without error; the webhook router sends a `sync` webhook when it changed records. */
  runCompleted: defineEvent('sync.run.completed', runEvent),
  runFailed: defineEvent('sync.run.failed', runEvent),
  /**
   * For operators (`GET /admin/sync-scheduler`): which replica holds the scheduling lease, as the
   * lease names it (`<host>/<pid>/<random>`), or null while none does.
   */
  /**
   * Schedules whose due state (next run, paused, run in flight) a replica just wrote, or removed:
   * the leader reads them again by `_id` into its due index (best effort; it also reads every
   * schedule again when it starts leading and every `SCHEDULER_RESCAN_MS`).
   */
  scheduleChanged: defineBroadcast('sync.schedule.changed', z.object({ ids: z.array(z.string().min(1)).min(1).max(1000) })),
  leader: defineRequest('sync.scheduler.leader', z.object({}), z.object({ owner: z.string().nullable(), last_tick: schedulerTick.nullable().optional() })),
} as const;
