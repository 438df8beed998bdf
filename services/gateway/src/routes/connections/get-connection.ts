import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { connectionParams, connectionReadRequest, getConnectionQuery } from './connection-query.js';

/** The hot path: the full connection, its token refreshed first when it expires within 15 minutes. */
export const getConnection = defineRoute({
  method: 'get',
  path: '/connections/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:read',
  schemas: { params: connectionParams, query: getConnectionQuery },
  handler: async ({ deps, key, params, query }) => ({
    body: await deps.bus.request(vaultContracts.getConnection, connectionReadRequest(key, params.connectionId, query)),
  }),
});
