import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';
import { queryList } from '../query.js';
import { uniqueKeyParams } from './integration-params.js';

/**
 * `include=webhook` adds `webhook_url`, and `webhookSecret` for a key with
 * `integrations:read_credentials` (the secret signs provider webhooks that Latchkey forwards as
 * genuine: a credential, as functions' `ctx.getIntegration` treats it); `include=credentials`
 * adds the client credentials and needs that scope.
 */
export const getIntegration = defineRoute({
  method: 'get',
  path: '/integrations/:uniqueKey',
  auth: 'api_key',
  scope: 'environment:integrations:read',
  doc: {
    summary: 'Get an integration',
    errors: ['unknown_provider_config'],
    answer: z.object({ data: vaultContracts.getIntegration.response.extend({ webhook_url: z.string().optional() }) }),
  },
  schemas: {
    params: uniqueKeyParams,
    query: z.strictObject({
      include: queryList.pipe(z.array(z.enum(['webhook', 'credentials']))),
    }),
  },
  handler: async ({ deps, key, params, query }) => {
    const includeCredentials = query.include.includes('credentials');
    const readsCredentials = key.scopes.has('environment:integrations:read_credentials');
    if (includeCredentials && !readsCredentials) {
      throw new AppError('forbidden', 'include=credentials needs the scope environment:integrations:read_credentials', {
        payload: { scope: 'environment:integrations:read_credentials' },
      });
    }
    const includeWebhook = query.include.includes('webhook');
    const integration = await deps.bus.request(vaultContracts.getIntegration, {
      environment_id: key.environmentId,
      unique_key: params.uniqueKey,
      include_webhook: includeWebhook && readsCredentials,
      include_credentials: includeCredentials,
    });
    if (!includeWebhook) return { body: { data: integration } };
    const environment = await deps.environments.findById(key.environmentId);
    const webhookUrl = `${deps.config.PUBLIC_URL.replace(/\/+$/, '')}/webhook/${environment?.public_id ?? ''}/${encodeURIComponent(integration.unique_key)}`;
    return { body: { data: { ...integration, webhook_url: webhookUrl } } };
  },
});
