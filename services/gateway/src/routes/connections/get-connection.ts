import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { connectionParams, connectionReadRequest, getConnectionQuery } from './connection-query.js';

/** The hot path: the full connection, its token refreshed first when it expires within 15 minutes. */
export const getConnection = defineRoute({
  method: 'get',
  path: '/connections/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:read',
  doc: {
    summary: 'Get a connection with fresh credentials',
    errors: ['unknown_connection', 'unknown_provider_config', 'refresh_token_external_error', 'connection_refresh_backoff', 'connection_refresh_exhausted', 'upstream_not_allowed'],
    answer: vaultContracts.getConnection.response,
  },
  schemas: { params: connectionParams, query: getConnectionQuery },
  handler: async ({ deps, key, params, query }) => ({
    body: await deps.bus.request(vaultContracts.getConnection, connectionReadRequest(key, params.connectionId, query)),
  }),
});
