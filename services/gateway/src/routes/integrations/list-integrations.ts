import { z } from 'zod';
import { integrationListItem, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/**
 * The API document's list form, for any key that may list: client credentials are read one
 * integration at a time (`GET /integrations/{key}?include=credentials`), never in a list.
 */
export const listIntegrations = defineRoute({
  method: 'get',
  path: '/integrations',
  auth: 'api_key',
  scope: 'environment:integrations:list',
  doc: { summary: 'List integrations', answer: z.object({ data: z.array(integrationListItem) }) },
  schemas: {},
  handler: async ({ deps, key }) => {
    const integrations = await deps.bus.request(vaultContracts.listIntegrations, { environment_id: key.environmentId });
    return {
      body: {
        data: integrations.map(({ unique_key, provider, logo, created_at, updated_at }) => ({ unique_key, provider, logo, created_at, updated_at })),
      },
    };
  },
});
