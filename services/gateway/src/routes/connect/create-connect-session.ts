import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { sessionBody, sessionCreated } from './session-body.js';

/** A 30-minute session for one end user's connect flow. */
export const createConnectSession = defineRoute({
  method: 'post',
  path: '/connect/sessions',
  auth: 'api_key',
  scope: 'environment:connect_sessions:write',
  schemas: { body: sessionBody },
  handler: async ({ deps, key, body }) => {
    return sessionCreated(deps, await deps.bus.request(vaultContracts.createConnectSession, { ...body, environment_id: key.environmentId }));
  },
});
