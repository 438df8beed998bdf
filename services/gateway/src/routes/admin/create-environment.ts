import { z } from 'zod';
import { gatewayContracts } from '@latchkey/contracts';
import { announceEnvironmentChange } from '../../domain/environment-events.js';
import { generateSigningKey } from '../../domain/signing-keys.js';
import { defineRoute } from '../../http/define-route.js';
import { environmentView } from '../../domain/environment-view.js';
import { environmentName } from './environment-view.js';

/**
 * Creates an environment in an account (`default` unless named). Its webhook signing key is in
 * this answer (and in `GET /admin/environments/{name}/webhook-signing-key`); rotate it to get a
 * new one.
 */
export const createEnvironment = defineRoute({
  method: 'post',
  path: '/admin/environments',
  auth: 'admin',
  scope: null,
  doc: { summary: 'Create an environment', status: 201, errors: ['duplicate_environment'] },
  schemas: {
    body: z.strictObject({ name: environmentName, account: environmentName.optional() }),
  },
  handler: async ({ deps, body }) => {
    const account = await deps.accounts.ensure(body.account ?? 'default');
    const signingKey = generateSigningKey(new Date());
    const environment = await deps.environments.create({ name: body.name, account_id: account._id, signing_key: signingKey });
    await announceEnvironmentChange(deps, gatewayContracts.environmentCreated, { environment_id: environment._id, name: environment.name }, deps.config.REQUEST_TIMEOUT_MS);
    return { status: 201, body: { data: { ...environmentView(environment), webhook_signing_key: signingKey.secret } } };
  },
});
