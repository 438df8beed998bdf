import { z } from 'zod';
import { gatewayContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { environmentName, findEnvironmentByName } from './environment-view.js';

/** Revokes a key: deleted, then every gateway replica drops it from memory at once. */
export const deleteApiKey = defineRoute({
  method: 'delete',
  path: '/admin/environments/:name/api-keys/:id',
  auth: 'admin',
  scope: null,
  doc: {
    summary: 'Revoke an API key',
    errors: ['unknown_environment', 'not_found'],
    answer: z.object({ success: z.literal(true) }),
  },
  schemas: { params: z.strictObject({ name: environmentName, id: z.string().regex(/^key_[A-Za-z0-9_-]{1,64}$/) }) },
  handler: async ({ deps, params }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    const scope = environmentId(environment._id);
    const key = await deps.apiKeys.findById(scope, params.id);
    if (!key) throw new AppError('not_found', `No API key ${params.id} in environment "${params.name}"`);
    await deps.apiKeys.delete(scope, key);
    deps.bus.broadcast(gatewayContracts.apiKeyChanged, { digest: key.digest });
    deps.keyCache.invalidate(key.digest);
    return { body: { success: true } };
  },
});
