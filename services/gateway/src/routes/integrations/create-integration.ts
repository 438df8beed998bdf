import { integrationWrite, vaultContracts } from '@latchkey/contracts';
import { z } from 'zod';
import { defineRoute } from '../../http/define-route.js';
import { checkHostsWidening, checkUnsignedWebhooks } from './integration-params.js';

export const createIntegration = defineRoute({
  method: 'post',
  path: '/integrations',
  auth: 'api_key',
  scope: 'environment:integrations:create',
  doc: {
    summary: 'Create an integration',
    status: 201,
    errors: ['duplicate_provider_config'],
    answer: z.object({ data: vaultContracts.createIntegration.response }),
  },
  schemas: { body: integrationWrite.omit({ custom: true }).extend({ provider: z.string().min(1).max(100) }) },
  handler: async ({ deps, key, body }) => {
    checkHostsWidening(key, body.allowed_hosts);
    checkUnsignedWebhooks(key, body.accept_unsigned_webhooks);
    return {
      status: 201,
      body: { data: await deps.bus.request(vaultContracts.createIntegration, { ...body, environment_id: key.environmentId }) },
    };
  },
});
