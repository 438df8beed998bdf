import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';

/** The environment's variables, as `[{name, value}]`. */
export const listEnvironmentVariables = defineRoute({
  method: 'get',
  path: '/environment-variables',
  auth: 'api_key',
  scope: 'environment:variables:read',
  doc: { summary: "The environment's variables", answer: z.array(z.object({ name: z.string(), value: z.string() })) },
  schemas: {},
  handler: async ({ deps, key }) => {
    const environment = await deps.environments.findById(key.environmentId);
    if (!environment) throw new AppError('unknown_environment', 'The environment of this key no longer exists');
    return { body: environment.variables.map(({ name, value }) => ({ name, value })) };
  },
});
