import { z } from 'zod';
import { endUserSchema, tagsSchema, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { connectionParams, providerConfigKeyQuery } from './connection-query.js';

export const patchConnection = defineRoute({
  method: 'patch',
  path: '/connections/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:update',
  doc: {
    summary: "Update a connection's tags or end user",
    errors: ['unknown_connection'],
    answer: vaultContracts.patchConnection.response,
  },
  schemas: {
    params: connectionParams,
    query: providerConfigKeyQuery,
    body: z.strictObject({ tags: tagsSchema.optional(), end_user: endUserSchema.optional() }),
  },
  handler: async ({ deps, key, params, query, body }) => ({
    body: await deps.bus.request(vaultContracts.patchConnection, {
      environment_id: key.environmentId,
      connection_id: params.connectionId,
      provider_config_key: query.provider_config_key,
      ...body,
    }),
  }),
});
