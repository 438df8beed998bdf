import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { CATALOG_READERS } from './catalog-readers.js';

export const getProvider = defineRoute({
  method: 'get',
  path: '/providers/:provider',
  auth: 'api_key_or_session',
  scope: CATALOG_READERS,
  doc: {
    summary: 'Get one provider of the catalog',
    errors: ['unknown_provider'],
    answer: z.object({ data: vaultContracts.getProvider.response }),
  },
  schemas: { params: z.strictObject({ provider: z.string().min(1).max(100) }) },
  handler: async ({ deps, params }) => ({ body: { data: await deps.bus.request(vaultContracts.getProvider, { name: params.provider }) } }),
});
