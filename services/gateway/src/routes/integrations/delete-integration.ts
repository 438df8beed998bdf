import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { uniqueKeyParams } from './integration-params.js';

/** Deletes the integration and its connections (each announced by a `connection.deleted` event). */
export const deleteIntegration = defineRoute({
  method: 'delete',
  path: '/integrations/:uniqueKey',
  auth: 'api_key',
  scope: 'environment:integrations:delete',
  doc: {
    summary: 'Delete an integration and its connections',
    errors: ['unknown_provider_config'],
    answer: vaultContracts.deleteIntegration.response,
  },
  schemas: { params: uniqueKeyParams },
  handler: async ({ deps, key, params }) => ({
    body: await deps.bus.request(vaultContracts.deleteIntegration, { environment_id: key.environmentId, unique_key: params.uniqueKey }),
  }),
});
