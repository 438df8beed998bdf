import { z } from 'zod';
import { operationView } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { findOperation, operationId } from './operation-query.js';

/** `GET /operations/{id}`: one operation of the caller's environment. */
export const getOperation = defineRoute({
  method: 'get',
  path: '/operations/:id',
  auth: 'api_key',
  scope: 'environment:operations:read',
  doc: { summary: 'Get one operation', answer: operationView, errors: ['not_found'] },
  schemas: { params: z.strictObject({ id: operationId }) },
  handler: async ({ deps, key, params }) => ({ body: await findOperation(deps, environmentId(key.environmentId), params.id) }),
});
