import { z } from 'zod';
import { anyCredentials, connectionId, endUserSchema, metadataSchema, tagsSchema, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/** Imports a connection with credentials the customer already holds. */
export const createConnection = defineRoute({
  method: 'post',
  path: '/connections',
  auth: 'api_key',
  scope: 'environment:connections:create',
  schemas: {
    body: z.strictObject({
      provider_config_key: z.string().min(1).max(128),
      connection_id: connectionId.optional(),
      credentials: anyCredentials,
      metadata: metadataSchema.optional(),
      connection_config: metadataSchema.optional(),
      tags: tagsSchema.optional(),
      end_user: endUserSchema.optional(),
    }),
  },
  handler: async ({ deps, key, body }) => ({
    status: 201,
    body: await deps.bus.request(vaultContracts.createConnection, {
      ...body,
      environment_id: key.environmentId,
      reader: { key_id: key.keyId },
      include_credentials: key.scopes.has('environment:connections:read_credentials'),
    }),
  }),
});
