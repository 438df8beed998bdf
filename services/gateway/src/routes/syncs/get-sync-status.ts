import { z } from 'zod';
import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { queryList } from '../query.js';

/** `GET /sync/status`: per sync, connection and variant, its status, frequency, last and next run, last counts and record counts. */
export const getSyncStatus = defineRoute({
  method: 'get',
  path: '/sync/status',
  auth: 'api_key',
  scope: 'environment:syncs:read',
  doc: {
    summary: 'The status of syncs per connection and variant',
    errors: ['unknown_sync', 'unknown_connection', 'unknown_provider_config'],
    answer: syncContracts.status.response,
  },
  schemas: {
    query: z.strictObject({
      provider_config_key: z.string().min(1).max(128),
      /** A comma list of sync names, or `*` for all. */
      syncs: queryList.pipe(z.array(z.string().min(1).max(100)).min(1, 'name the syncs, or * for all').max(100)),
      connection_id: z.string().min(1).max(255).optional(),
    }),
  },
  handler: async ({ deps, key, query }) => ({
    body: await deps.bus.request(syncContracts.status, {
      environment_id: key.environmentId,
      provider_config_key: query.provider_config_key,
      syncs: query.syncs.includes('*') ? [] : query.syncs,
      ...(query.connection_id === undefined ? {} : { connection_id: query.connection_id }),
    }),
  }),
});
