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
  schemas: {},
  handler: async ({ deps }) => {
    const { owner } = await deps.bus.request(syncContracts.leader, {});
    return { body: { data: { leader: owner } } };
  },
});
