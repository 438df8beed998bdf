import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';
import { environmentParams, findEnvironmentByName } from './environment-view.js';

/** A new webhook signing key, shown once; the previous one keeps signing for 24 hours. */
export const rotateSigningKey = defineRoute({
  method: 'post',
  path: '/admin/environments/:name/webhook-signing-key/rotate',
  auth: 'admin',
  scope: null,
  doc: {
    summary: "Rotate the environment's webhook signing key",
    errors: ['unknown_environment'],
    answer: z.object({ data: z.object({ signing_key: z.string() }) }),
  },
  schemas: { params: environmentParams },
  handler: async ({ deps, params }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    // Rotated from the stored keys, not the cached ones, and alone: two rotations at once keep both new keys.
    const keys = await deps.environments.rotateSigningKeys(environment._id, new Date());
    if (!keys) throw new AppError('unknown_environment', `No environment named "${params.name}"`);
    return { body: { data: { signing_key: keys[0]?.secret } } };
  },
});
