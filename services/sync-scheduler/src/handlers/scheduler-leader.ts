import type { JsonKv } from '@latchkey/bus';
import type { ResponseOf, syncContracts } from '@latchkey/contracts';
import type { LeaseEntry } from '../scheduling/lease.js';

/**
 * `sync.scheduler.leader`: the lease's holder as the lease entry names it, and the holder's last
 * tick as it wrote it there, for operators; any replica answers.
 */
export function schedulerLeaderHandler(deps: { lease: Pick<JsonKv<LeaseEntry>, 'get'>; key: string }) {
  return async (): Promise<ResponseOf<typeof syncContracts.leader>> => {
    const entry = await deps.lease.get(deps.key);
    return { owner: entry?.value.owner ?? null, last_tick: entry?.value.last_tick ?? null };
  };
}
