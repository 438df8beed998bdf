import { z } from 'zod';
import { operationView } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { findOperation, operationId } from '../operations/operation-query.js';
import { environmentName, findEnvironmentByName } from './environment-view.js';

/** `GET /admin/environments/{name}/operations/{id}`: one operation of an environment. */
export const getEnvironmentOperation = defineRoute({
  method: 'get',
  path: '/admin/environments/:name/operations/:id',
  auth: 'admin',
  scope: null,
  doc: { summary: 'One operation of an environment', answer: operationView, errors: ['unknown_environment', 'not_found'] },
  schemas: { params: z.strictObject({ name: environmentName, id: operationId }) },
  handler: async ({ deps, params }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    return { body: await findOperation(deps, environmentId(environment._id), params.id) };
  },
});
