import { z } from 'zod';
import { BASE_VARIANT, syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { variantName } from './sync-body.js';

export const variantParams = z.strictObject({
  name: z.string().min(1).max(100),
  variant: variantName.refine((value) => value !== BASE_VARIANT, `"${BASE_VARIANT}" is every sync's own variant`),
});
export const variantBody = z.strictObject({ provider_config_key: z.string().min(1).max(128), connection_id: z.string().min(1).max(255) });

/** `POST /sync/{name}/variant/{variant}`: the sync again for one connection under another name, with its own schedule, state and records. */
export const createSyncVariant = defineRoute({
  method: 'post',
  path: '/sync/:name/variant/:variant',
  auth: 'api_key',
  scope: 'environment:syncs:variant:create',
  doc: {
    summary: 'Create a variant of a sync for a connection',
    errors: ['failed_sync_variant_creation', 'unknown_sync', 'unknown_connection', 'unknown_provider_config'],
    answer: syncContracts.createVariant.response,
  },
  schemas: { params: variantParams, body: variantBody },
  handler: async ({ deps, key, params, body }) => ({
    body: await deps.bus.request(syncContracts.createVariant, { environment_id: key.environmentId, ...body, sync_name: params.name, variant: params.variant }),
  }),
});
