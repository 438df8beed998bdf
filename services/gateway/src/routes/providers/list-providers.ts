import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { CATALOG_READERS } from './catalog-readers.js';

export const listProviders = defineRoute({
  method: 'get',
  path: '/providers',
  auth: 'api_key_or_session',
  scope: CATALOG_READERS,
  doc: { summary: 'List the provider catalog', answer: z.object({ data: vaultContracts.listProviders.response }) },
  schemas: { query: z.strictObject({ search: z.string().max(100).optional() }) },
  handler: async ({ deps, query }) => ({
    body: { data: await deps.bus.request(vaultContracts.listProviders, query.search === undefined ? {} : { search: query.search }) },
  }),
});
