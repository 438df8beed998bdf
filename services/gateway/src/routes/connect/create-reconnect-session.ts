import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { reconnectBody, sessionCreated } from './session-body.js';

/** A session bound to one connection made through a session: the flow replaces its credentials only. */
export const createReconnectSession = defineRoute({
  method: 'post',
  path: '/connect/sessions/reconnect',
  auth: 'api_key',
  scope: 'environment:connect_sessions:write',
  schemas: { body: reconnectBody },
  handler: async ({ deps, key, body }) => {
    const { connection_id: connectionId, integration_id: integrationId, ...rest } = body;
    return sessionCreated(
      deps,
      await deps.bus.request(vaultContracts.createConnectSession, {
        ...rest,
        environment_id: key.environmentId,
        reconnect: { connection_id: connectionId, integration_id: integrationId },
      }),
    );
  },
});
