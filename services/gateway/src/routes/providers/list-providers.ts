import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

export const listProviders = defineRoute({
  method: 'get',
  path: '/providers',
  auth: 'api_key',
  scope: 'environment:integrations:list',
  schemas: { query: z.strictObject({ search: z.string().max(100).optional() }) },
  handler: async ({ deps, query }) => ({
    body: { data: await deps.bus.request(vaultContracts.listProviders, query.search === undefined ? {} : { search: query.search }) },
  }),
});
