import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { variantBody, variantParams } from './sync-body.js';

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
