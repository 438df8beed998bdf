import { z } from 'zod';
import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { syncSelection } from './sync-body.js';

/** `POST /sync/start`: resumes the schedules of the named syncs (all when `syncs` is empty) for one connection or all. */
export const startSyncs = defineRoute({
  method: 'post',
  path: '/sync/start',
  auth: 'api_key',
  scope: 'environment:syncs:execute',
  doc: {
    summary: 'Resume syncs',
    errors: ['unknown_sync', 'unknown_connection', 'unknown_provider_config'],
    answer: z.object({ success: z.literal(true) }),
  },
  schemas: { body: z.strictObject(syncSelection) },
  errorShape: 'message',
  handler: async ({ deps, key, body }) => {
    await deps.bus.request(syncContracts.setPaused, { environment_id: key.environmentId, ...body, paused: false });
    return { body: { success: true } };
  },
});
