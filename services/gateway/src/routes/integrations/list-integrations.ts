import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/** Client credentials are included only for a key with `integrations:list_credentials`. */
export const listIntegrations = defineRoute({
  method: 'get',
  path: '/integrations',
  auth: 'api_key',
  scope: 'environment:integrations:list',
  schemas: {},
  handler: async ({ deps, key }) => ({
    body: {
      data: await deps.bus.request(vaultContracts.listIntegrations, {
        environment_id: key.environmentId,
        include_credentials: key.scopes.has('environment:integrations:list_credentials'),
      }),
    },
  }),
});
