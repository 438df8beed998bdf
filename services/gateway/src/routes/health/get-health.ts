import { defineRoute } from '../../http/define-route.js';

/** Liveness: the process answers. */
export const getHealth = defineRoute({
  method: 'get',
  path: '/health',
  auth: 'public',
  scope: null,
  doc: { summary: 'Liveness: the process runs' },
  schemas: {},
  handler: async () => ({ body: { status: 'ok' } }),
});
