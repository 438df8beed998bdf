import { z } from 'zod';
import { defineRoute } from '../../http/define-route.js';

/** Liveness: the process answers. */
export const getHealth = defineRoute({
  method: 'get',
  path: '/health',
  auth: 'public',
  scope: null,
  doc: { summary: 'Liveness: the process runs', answer: z.object({ status: z.literal('ok') }) },
  schemas: {},
  handler: async () => ({ body: { status: 'ok' } }),
});
