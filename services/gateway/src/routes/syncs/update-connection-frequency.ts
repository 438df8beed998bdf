import { z } from 'zod';
import { BASE_VARIANT, syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { variantName } from './sync-body.js';

/** `PUT /sync/update-connection-frequency`: one connection's own frequency for a sync (and variant); `null` reverts to the deployment's. */
export const updateConnectionFrequency = defineRoute({
  method: 'put',
  path: '/sync/update-connection-frequency',
  auth: 'api_key',
  scope: 'environment:syncs:update',
  doc: {
    summary: "Override a sync's frequency for one connection",
    errors: ['invalid_frequency', 'unknown_sync', 'unknown_sync_variant', 'unknown_connection', 'unknown_provider_config'],
    answer: syncContracts.updateFrequency.response,
  },
  schemas: {
    body: z.strictObject({
      provider_config_key: z.string().min(1).max(128),
      connection_id: z.string().min(1).max(255),
      sync_name: z.string().min(1).max(100),
      sync_variant: variantName.default(BASE_VARIANT),
      frequency: z.string().min(1).max(100).nullable(),
    }),
  },
  handler: async ({ deps, key, body }) => ({
    body: await deps.bus.request(syncContracts.updateFrequency, {
      environment_id: key.environmentId,
      provider_config_key: body.provider_config_key,
      connection_id: body.connection_id,
      sync_name: body.sync_name,
      variant: body.sync_variant,
      frequency: body.frequency,
    }),
  }),
});
