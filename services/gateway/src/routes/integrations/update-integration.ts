import { z } from 'zod';
import { integrationWrite, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { checkHostsWidening, checkUnsignedWebhooks, uniqueKeyParams } from './integration-params.js';

/** Only the fields passed change; a rename is refused while the integration has connections. */
export const updateIntegration = defineRoute({
  method: 'patch',
  path: '/integrations/:uniqueKey',
  auth: 'api_key',
  scope: 'environment:integrations:update',
  doc: {
    summary: 'Update or rename an integration',
    errors: ['unknown_provider_config', 'duplicate_provider_config', 'integration_has_connections'],
    answer: z.object({ data: vaultContracts.updateIntegration.response }),
  },
  schemas: { params: uniqueKeyParams, body: integrationWrite.partial() },
  handler: async ({ deps, key, params, body }) => {
    checkHostsWidening(key, body.allowed_hosts);
    checkUnsignedWebhooks(key, body.accept_unsigned_webhooks);
    return {
      body: {
        data: await deps.bus.request(vaultContracts.updateIntegration, {
          environment_id: key.environmentId,
          unique_key: params.uniqueKey,
          patch: body,
        }),
      },
    };
  },
});
