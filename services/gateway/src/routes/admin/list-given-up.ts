import { z } from 'zod';
import { defineRoute } from '../../http/define-route.js';

/**
 * `GET /admin/given-up`: the JetStream messages the services stopped retrying (a payload that
 * failed its contract, a final error, or the delivery cap), newest first, with the error that
 * ended each. `before` (an `at` of the last page) pages back.
 */
export const listGivenUp = defineRoute({
  method: 'get',
  path: '/admin/given-up',
  auth: 'admin',
  scope: null,
  doc: { summary: 'Messages given up after their delivery cap, newest first' },
  schemas: {
    query: z.strictObject({
      limit: z.coerce.number().int().min(1).max(1000).default(100),
      before: z.iso.datetime({ offset: true }).optional(),
    }),
  },
  handler: async ({ deps, query }) => ({
    body: { data: await deps.givenUp.list(query.limit, query.before === undefined ? undefined : new Date(query.before)) },
  }),
});
