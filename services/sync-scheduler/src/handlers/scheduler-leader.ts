import type { JsonKv } from '@latchkey/bus';
import type { ResponseOf, syncContracts } from '@latchkey/contracts';

/** `sync.scheduler.leader`: the lease's holder as the lease entry names it, for operators; any replica answers. */
export function schedulerLeaderHandler(deps: { lease: Pick<JsonKv<{ owner: string }>, 'get'>; key: string }) {
  return async (): Promise<ResponseOf<typeof syncContracts.leader>> => {
    const entry = await deps.lease.get(deps.key);
    return { owner: entry?.value.owner ?? null };
  };
}
