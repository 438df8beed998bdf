import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

export const getProvider = defineRoute({
  method: 'get',
  path: '/providers/:provider',
  auth: 'api_key',
  scope: 'environment:integrations:list',
  schemas: { params: z.strictObject({ provider: z.string().min(1).max(100) }) },
  handler: async ({ deps, params }) => ({ body: { data: await deps.bus.request(vaultContracts.getProvider, { name: params.provider }) } }),
});
