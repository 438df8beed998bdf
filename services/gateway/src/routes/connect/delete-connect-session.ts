import { vaultContracts } from '@latchkey/contracts';
import { SESSION_TOKEN_QUERY } from '../../http/authenticate.js';
import { defineRoute } from '../../http/define-route.js';

/** Ends the session at once (the end user closed the flow). */
export const deleteConnectSession = defineRoute({
  method: 'delete',
  path: '/connect/session',
  auth: 'connect_session',
  scope: null,
  doc: { summary: 'End the connect session', status: 204 },
  schemas: { query: SESSION_TOKEN_QUERY },
  handler: async ({ deps, session }) => {
    await deps.bus.request(vaultContracts.deleteConnectSession, { token: session.token });
    return { status: 204 };
  },
});
