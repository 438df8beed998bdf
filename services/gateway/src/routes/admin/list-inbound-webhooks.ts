import { z } from 'zod';
import { inboundLogEntry, webhookContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { environmentParams, findEnvironmentByName, logPageQuery } from './environment-view.js';

/**
 * `GET /admin/environments/{name}/webhooks/inbound`: what became of the provider webhooks the
 * environment received (forwarded, not forwarded, rejected, and why), newest first, from the
 * webhook router's log. `before` (a `received_at` of the last page) pages back.
 */
export const listInboundWebhooks = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/webhooks/inbound',
  auth: 'admin',
  scope: null,
  doc: {
    summary: "An environment's inbound provider webhooks and what became of them, newest first",
    answer: z.object({ data: z.array(inboundLogEntry) }),
    errors: ['unknown_environment', 'service_unavailable'],
  },
  schemas: {
    params: environmentParams,
    query: z.strictObject({
      ...logPageQuery,
      status: z.enum(['forwarded', 'not_forwarded', 'rejected']).optional(),
    }),
  },
  handler: async ({ deps, params, query }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    return {
      body: await deps.bus.request(webhookContracts.listInbound, { environment_id: environment._id, ...query }),
    };
  },
});
