import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { apiKeyView } from './api-key-view.js';
import { environmentParams, findEnvironmentByName } from './environment-view.js';

/** The environment's keys with `last_used_at`; this replica's pending uses are written first. */
export const listApiKeys = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/api-keys',
  auth: 'admin',
  scope: null,
  doc: { summary: "List an environment's API keys", errors: ['unknown_environment'] },
  schemas: { params: environmentParams },
  handler: async ({ deps, params }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    await deps.lastUsed.flush();
    const keys = await deps.apiKeys.list(environmentId(environment._id));
    return { body: { data: keys.map(apiKeyView) } };
  },
});
