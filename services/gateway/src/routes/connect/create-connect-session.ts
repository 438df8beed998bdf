import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { sessionBody, sessionCreated, sessionCreatedAnswer } from './session-body.js';

/** A 30-minute session for one end user's connect flow. */
export const createConnectSession = defineRoute({
  method: 'post',
  path: '/connect/sessions',
  auth: 'api_key',
  scope: 'environment:connect_sessions:write',
  doc: {
    summary: 'Create a connect session for an end user',
    status: 201,
    errors: ['unknown_provider_config'],
    answer: sessionCreatedAnswer,
  },
  schemas: { body: sessionBody },
  handler: async ({ deps, key, body }) => {
    return sessionCreated(
      deps,
      await deps.bus.request(vaultContracts.createConnectSession, {
        ...body,
        environment_id: key.environmentId,
        reads_client_secrets: key.scopes.has('environment:integrations:read_credentials'),
      }),
    );
  },
});
