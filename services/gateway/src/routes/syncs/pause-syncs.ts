import { z } from 'zod';
import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { syncSelection } from './sync-body.js';

/** `POST /sync/pause`: no more scheduled runs of the named syncs until started again (a run in flight finishes). */
export const pauseSyncs = defineRoute({
  method: 'post',
  path: '/sync/pause',
  auth: 'api_key',
  scope: 'environment:syncs:execute',
  doc: {
    summary: 'Pause syncs',
    errors: ['unknown_sync', 'unknown_connection', 'unknown_provider_config'],
    answer: z.object({ success: z.literal(true) }),
  },
  schemas: { body: z.strictObject(syncSelection) },
  handler: async ({ deps, key, body }) => {
    await deps.bus.request(syncContracts.setPaused, { environment_id: key.environmentId, ...body, paused: true });
    return { body: { success: true } };
  },
});
