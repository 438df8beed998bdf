import { z } from 'zod';
import { defineRoute } from '../../http/define-route.js';
import { environmentParams, findEnvironmentByName } from './environment-view.js';

/**
 * `GET /admin/environments/{name}/webhook-signing-key`: the key webhooks are signed with now
 * (the newest), so an operator can hand it to the customer's `verifyIncomingWebhookRequest`
 * without rotating it first.
 */
export const getSigningKey = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/webhook-signing-key',
  auth: 'admin',
  scope: null,
  doc: {
    summary: "The environment's webhook signing key",
    errors: ['unknown_environment'],
    answer: z.object({ data: z.object({ signing_key: z.string() }) }),
  },
  schemas: { params: environmentParams },
  handler: async ({ deps, params }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    // The one not retired; a rotation keeps the retired ones only to verify for a while.
    const current = environment.signing_keys.find((key) => key.retired_at === null) ?? environment.signing_keys[0];
    return { body: { data: { signing_key: current?.secret } } };
  },
});
