import { z } from 'zod';
import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { syncSelection, variantName } from './sync-body.js';

/**
 * `POST /sync/trigger`: one run now of each named sync, unless one is in flight. `full_resync`
 * (or `sync_mode: full_refresh_and_clear_cache`) first clears the records of the sync's models
 * and its checkpoint; `sync_mode: full_refresh` the checkpoint only (the run reads everything
 * again, and finds what it already holds unchanged); `incremental` goes on from the checkpoint.
 */
export const triggerSyncs = defineRoute({
  method: 'post',
  path: '/sync/trigger',
  auth: 'api_key',
  scope: 'environment:syncs:execute',
  doc: {
    summary: 'Run syncs now',
    errors: ['unknown_sync', 'unknown_sync_variant', 'unknown_connection', 'unknown_provider_config'],
    answer: z.object({ success: z.literal(true) }),
  },
  schemas: {
    body: z.strictObject({
      ...syncSelection,
      sync_variant: variantName.optional(),
      full_resync: z.boolean().optional(),
      sync_mode: z.enum(['incremental', 'full_refresh', 'full_refresh_and_clear_cache']).optional(),
    }),
  },
  handler: async ({ deps, key, body }) => {
    await deps.bus.request(syncContracts.trigger, {
      environment_id: key.environmentId,
      provider_config_key: body.provider_config_key,
      syncs: body.syncs,
      ...(body.connection_id === undefined ? {} : { connection_id: body.connection_id }),
      ...(body.sync_variant === undefined ? {} : { variant: body.sync_variant }),
      full_resync: body.full_resync === true || body.sync_mode === 'full_refresh_and_clear_cache',
      ...(body.sync_mode === 'full_refresh' ? { reset_checkpoint: true } : {}),
    });
    return { body: { success: true } };
  },
});
