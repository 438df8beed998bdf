import { z } from 'zod';
import { defineRequest } from './define.js';

/**
 * The records store, owned by the sync-scheduler. Sync functions write batches through
 * `records.write` (the functions runtime calls it for `batchSave` / `batchUpdate` /
 * `batchDelete`); customers read through `records.list` and drop payloads with `records.prune`.
 * A connection is named as customers name it (`connection_id` + `provider_config_key`); the
 * store keys records by the connection's public integer id, which a rename of the integration
 * does not change.
 */

const environment_id = z.string().min(1);
export const RECORD_ACTIONS = ['ADDED', 'UPDATED', 'DELETED'] as const;
export type RecordAction = (typeof RECORD_ACTIONS)[number];

/** Base variant: what a sync writes unless it runs as a variant. */
export const BASE_VARIANT = 'base';

/** A model's name, as the records store keys it (a deployment is held to it too: `deploymentBody`). */
export const modelName = z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/, 'a letter, then letters, digits or _ (64 at most)');
export const variantName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or - (64 at most)');

/** A model field as deployed functions declare it: `name`, and a `type` such as `string`, `number`, `boolean`, `date`, `object`, `array`; a `?` suffix or `optional` makes it optional. */
export const modelField = z.object({ name: z.string().min(1), type: z.string().min(1), optional: z.boolean().optional() });
export type ModelField = z.infer<typeof modelField>;

/** Which claim of a sync run an attempt is: `sync.run.begin` counts them from 1. */
export const runAttempt = z.number().int().min(1);

const connectionRef = {
  environment_id,
  connection_id: z.string().min(1).max(255),
  provider_config_key: z.string().min(1),
};

/** Where a record stands: returned as `_metadata` beside the record's own fields. */
export const recordMetadata = z.object({
  first_seen_at: z.string(),
  last_modified_at: z.string(),
  last_action: z.enum(RECORD_ACTIONS),
  deleted_at: z.string().nullable(),
  /** Page from here to read what changed after this record. */
  cursor: z.string(),
  /** Set once `records.prune` dropped the payload: only `id` is left. */
  pruned_at: z.string().nullable(),
});

export const recordFailure = z.object({
  /** Position in the batch. */
  index: z.number().int(),
  id: z.string().optional(),
  errors: z.array(z.object({ code: z.string(), message: z.string(), path: z.string().optional() })),
});
export type RecordFailure = z.infer<typeof recordFailure>;

export const recordsContracts = {
  /**
   * Upserts (`save`), merges into existing records (`update`) or marks them deleted (`delete`).
   * Records whose content is unchanged are not rewritten. Invalid records are reported in
   * `failed` and the others of the batch are written all the same.
   */
  write: defineRequest(
    'records.write',
    z.object({
      ...connectionRef,
      model: modelName,
      variant: variantName,
      mode: z.enum(['save', 'update', 'delete']),
      records: z.array(z.record(z.string(), z.unknown())).max(10_000),
      /** The model's fields, from the deployment: records are checked against them. */
      fields: z.array(modelField).optional(),
      /**
       * The scheduled sync run writing, if any: refused (`function_failed`) once that run is over
       * (its variant deleted, its schedule gone, another run in its place), so a run still going
       * after its end writes nothing more.
       */
      run_id: z.string().min(1).optional(),
      /** The attempt of that run (`beginRun`'s): refused too once a later attempt of the run began. */
      attempt: runAttempt.optional(),
    }),
    z.object({
      added: z.number().int(),
      updated: z.number().int(),
      deleted: z.number().int(),
      unchanged: z.number().int(),
      failed: z.array(recordFailure),
    }),
  ),
  list: defineRequest(
    'records.list',
    z.object({
      ...connectionRef,
      model: modelName,
      variant: variantName,
      modified_after: z.iso.datetime({ offset: true }).optional(),
      /** Which last actions to return; all when absent. */
      filter: z.array(z.enum(RECORD_ACTIONS)).optional(),
      limit: z.number().int().min(1).max(10_000),
      cursor: z.string().optional(),
      ids: z.array(z.string()).max(10_000).optional(),
    }),
    z.object({ records: z.array(z.record(z.string(), z.unknown())), next_cursor: z.string().nullable() }),
  ),
  prune: defineRequest(
    'records.prune',
    z.object({
      ...connectionRef,
      model: modelName,
      variant: variantName,
      until_cursor: z.string().min(1),
      limit: z.number().int().min(1).max(10_000),
    }),
    z.object({ count: z.number().int(), has_more: z.boolean() }),
  ),
} as const;
