import { z } from 'zod';
import { environmentVariable, gatewayContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { EnvironmentPatch } from '../../db/environment-repo.js';
import { announceEnvironmentChange } from '../../domain/environment-events.js';
import { defineRoute } from '../../http/define-route.js';
import { environmentView } from '../../domain/environment-view.js';
import { environmentParams, findEnvironmentByName } from './environment-view.js';

const httpUrl = z.url({ protocol: /^https?$/ }).max(2048);

/** A variable as the operator sends it: an unknown key (`secret`, a typo) is refused, not dropped. */
const variableBody = z.strictObject(environmentVariable.shape);

/** An origin exactly as browsers spell it (`https://app.example.com`, a port if not the default): no path, no credentials. */
const origin = z
  .string()
  .max(2048)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
    } catch {
      return false;
    }
  }, 'must be an origin: scheme, host and optional port, like https://app.example.com');

/** Sets the given settings only; `variables` replaces the whole list; null clears a URL. */
export const updateEnvironment = defineRoute({
  method: 'patch',
  path: '/admin/environments/:name',
  auth: 'admin',
  scope: null,
  doc: { summary: "Update an environment's settings and variables", errors: ['unknown_environment'] },
  schemas: {
    params: environmentParams,
    body: z.strictObject({
      webhook_url: httpUrl.nullable().optional(),
      webhook_url_secondary: httpUrl.nullable().optional(),
      send_auth_webhooks: z.boolean().optional(),
      callback_url: httpUrl.nullable().optional(),
      /** Where the Connect UI may send the end user back (`return_url`) and post its outcome: replaces the list. */
      connect_return_origins: z.array(origin).max(50).optional(),
      variables: z
        .array(variableBody)
        .max(500)
        .refine((list) => new Set(list.map((variable) => variable.name)).size === list.length, 'variable names must be unique')
        .optional(),
    }),
  },
  handler: async ({ deps, params, body }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    const patch: EnvironmentPatch = {};
    for (const [field, value] of Object.entries(body)) {
      if (value !== undefined) Object.assign(patch, { [field]: value });
    }
    const updated = await deps.environments.update(environment._id, patch);
    if (!updated) throw new AppError('unknown_environment', `No environment named "${params.name}"`);
    await announceEnvironmentChange(deps, gatewayContracts.environmentUpdated, { environment_id: updated._id, name: updated.name }, deps.config.REQUEST_TIMEOUT_MS);
    return { body: { data: environmentView(updated) } };
  },
});
