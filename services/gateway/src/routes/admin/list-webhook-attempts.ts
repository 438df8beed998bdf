import { z } from 'zod';
import { deliveryAttemptEntry, webhookContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { environmentParams, findEnvironmentByName, logPageQuery } from './environment-view.js';

/**
 * `GET /admin/environments/{name}/webhooks/attempts`: every attempt at the environment's
 * customer webhooks (status or error, duration, and where the delivery stood after it), newest
 * first, never a body. `webhook_id` narrows to one webhook; `before` (an `at` of the last page)
 * pages back.
 */
export const listWebhookAttempts = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/webhooks/attempts',
  auth: 'admin',
  scope: null,
  doc: {
    summary: "Every attempt at an environment's customer webhooks, newest first",
    answer: z.object({ data: z.array(deliveryAttemptEntry) }),
    errors: ['unknown_environment', 'service_unavailable'],
  },
  schemas: {
    params: environmentParams,
    query: z.strictObject({
      ...logPageQuery,
      webhook_id: z.string().min(1).max(128).optional(),
      outcome: z.enum(['delivered', 'retrying', 'failed']).optional(),
    }),
  },
  handler: async ({ deps, params, query }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    return {
      body: await deps.bus.request(webhookContracts.listAttempts, { environment_id: environment._id, ...query }),
    };
  },
});
