import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { connectionParams, providerConfigKeyQuery } from './connection-query.js';

export const deleteConnection = defineRoute({
  method: 'delete',
  path: '/connections/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:delete',
  schemas: { params: connectionParams, query: providerConfigKeyQuery },
  handler: async ({ deps, key, params, query }) => ({
    body: await deps.bus.request(vaultContracts.deleteConnection, {
      environment_id: key.environmentId,
      connection_id: params.connectionId,
      provider_config_key: query.provider_config_key,
    }),
  }),
});
