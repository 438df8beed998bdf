import { z } from 'zod';
import { FULL_ACCESS, SCOPES, gatewayContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import { digestApiKey, generateApiKeySecret, hintOf } from '../../domain/api-key-secrets.js';
import { newId } from '../../domain/ids.js';
import { defineRoute } from '../../http/define-route.js';
import { apiKeyView } from './api-key-view.js';
import { environmentParams, findEnvironmentByName } from './environment-view.js';

/** A new key with full access or chosen scopes; its secret is in this answer and nowhere else. */
export const createApiKey = defineRoute({
  method: 'post',
  path: '/admin/environments/:name/api-keys',
  auth: 'admin',
  scope: null,
  doc: { summary: 'Create an API key', status: 201, errors: ['unknown_environment'] },
  schemas: {
    params: environmentParams,
    body: z.strictObject({
      display_name: z.string().trim().min(1).max(255),
      scopes: z.union([z.literal(FULL_ACCESS), z.array(z.enum(SCOPES)).min(1)]),
    }),
  },
  handler: async ({ deps, params, body }) => {
    const environment = await findEnvironmentByName(deps, params.name);
    const secret = generateApiKeySecret();
    const digest = digestApiKey(secret, deps.config.API_KEY_DIGEST_SECRET);
    const key = await deps.apiKeys.insert(environmentId(environment._id), {
      _id: newId('key'),
      account_id: environment.account_id,
      display_name: body.display_name,
      scopes: body.scopes === FULL_ACCESS ? FULL_ACCESS : [...new Set(body.scopes)],
      digest,
      hint: hintOf(secret),
      created_at: new Date(),
      last_used_at: null,
    });
    // Replicas may remember this digest as unknown (someone tried it early): make them forget.
    deps.bus.broadcast(gatewayContracts.apiKeyChanged, { digest });
    const { hint: _hint, last_used_at: _lastUsed, ...shown } = apiKeyView(key);
    return { status: 201, body: { data: { ...shown, secret } } };
  },
});
