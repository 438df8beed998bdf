import { defineRoute } from '../../http/define-route.js';
import { createSession, sessionBody, sessionCreatedAnswer } from './session-body.js';

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
  handler: ({ deps, key, body }) => createSession(deps, key, body),
});
