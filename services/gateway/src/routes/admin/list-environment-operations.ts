import { z } from 'zod';
import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { operationFilterOf, operationListQuery, operationPage } from '../operations/operation-query.js';
import { environmentName, findEnvironmentByName } from './environment-view.js';

/** `GET /admin/environments/{name}/operations`: an environment's operations log, as `GET /operations` gives it to its keys. */
export const listEnvironmentOperations = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/operations',
  auth: 'admin',
  scope: null,
  doc: { summary: "An environment's operations log, newest first", answer: operationPage, errors: ['unknown_environment'] },
  schemas: { params: z.strictObject({ name: environmentName }), query: operationListQuery },
  handler: async ({ deps, params, query }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    return { body: await deps.operations.list(environmentId(environment._id), operationFilterOf(query), query.limit) };
  },
});
