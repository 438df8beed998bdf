import { z } from 'zod';
import { schedulerTick, syncContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/**
 * `GET /admin/sync-scheduler`: which sync-scheduler replica schedules now (the holder of the
 * lease, `<host>/<pid>/<random>`), or null while none does, for instance between a holder's death
 * and the lease's expiry; and what the leader's last tick did (`last_tick`: when it began, its
 * duration, the due query's, schedules read, runs queued), null before its first.
 */
export const getSchedulerLeader = defineRoute({
  method: 'get',
  path: '/admin/sync-scheduler',
  auth: 'admin',
  scope: null,
  doc: {
    summary: 'The sync-scheduler replica that schedules now',
    answer: z.object({ data: z.object({ leader: z.string().nullable(), last_tick: schedulerTick.nullable() }) }),
    errors: ['service_unavailable'],
  },
  schemas: {},
  handler: async ({ deps }) => {
    const { owner, last_tick } = await deps.bus.request(syncContracts.leader, {});
    return { body: { data: { leader: owner, last_tick: last_tick ?? null } } };
  },
});
