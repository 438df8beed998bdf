import { defineRoute } from '../../http/define-route.js';

/** The session behind the end user's token, as the Connect UI needs it. */
export const getConnectSession = defineRoute({
  method: 'get',
  path: '/connect/session',
  auth: 'connect_session',
  scope: null,
  schemas: {},
  handler: async ({ session }) => {
    const { token: _token, environment_id: _environment, ...view } = session;
    return { body: { data: view } };
  },
});
