import { z } from 'zod';
import { syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/**
 * `GET /admin/sync-scheduler`: which sync-scheduler replica schedules now (the holder of the
 * lease, `<host>/<pid>/<random>`), or null while none does, for instance between a holder's death
 * and the lease's expiry.
 */
export const getSchedulerLeader = defineRoute({
  method: 'get',
  path: '/admin/sync-scheduler',
  auth: 'admin',
  scope: null,
  doc: {
    summary: 'The sync-scheduler replica that schedules now',
    answer: z.object({ data: z.object({ leader: z.string().nullable() }) }),
    errors: ['service_unavailable'],
  },
  schemas: {},
  handler: async ({ deps }) => {
    const { owner } = await deps.bus.request(syncContracts.leader, {});
    return { body: { data: { leader: owner } } };
  },
});
