import { defineRoute } from '../../http/define-route.js';
import { createSession, reconnectBody, sessionCreatedAnswer } from './session-body.js';

/** A session bound to one connection made through a session: the flow replaces its credentials only. */
export const createReconnectSession = defineRoute({
  method: 'post',
  path: '/connect/sessions/reconnect',
  auth: 'api_key',
  scope: 'environment:connect_sessions:write',
  doc: {
    summary: 'Create a session that reconnects an existing connection',
    status: 201,
    errors: ['unknown_connection', 'unknown_provider_config'],
    answer: sessionCreatedAnswer,
  },
  schemas: { body: reconnectBody },
  handler: async ({ deps, key, body }) => {
    const { connection_id: connectionId, integration_id: integrationId, ...rest } = body;
    return createSession(deps, key, { ...rest, reconnect: { connection_id: connectionId, integration_id: integrationId } });
  },
});
