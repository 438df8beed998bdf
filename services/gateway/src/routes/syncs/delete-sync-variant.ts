import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { variantBody, variantParams } from './sync-body.js';

/** `DELETE /sync/{name}/variant/{variant}`: the variant's schedule and records go; `base` cannot be deleted. */
export const deleteSyncVariant = defineRoute({
  method: 'delete',
  path: '/sync/:name/variant/:variant',
  auth: 'api_key',
  scope: 'environment:syncs:variant:delete',
  doc: {
    summary: 'Delete a variant of a sync and its records',
    errors: ['unknown_sync_variant', 'unknown_connection', 'unknown_provider_config'],
    answer: syncContracts.deleteVariant.response,
  },
  schemas: { params: variantParams, body: variantBody },
  handler: async ({ deps, key, params, body }) => ({
    body: await deps.bus.request(syncContracts.deleteVariant, { environment_id: key.environmentId, ...body, sync_name: params.name, variant: params.variant }),
  }),
});
