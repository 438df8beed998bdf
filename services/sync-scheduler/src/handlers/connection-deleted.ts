import type { PayloadOf, vaultContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import { removeConnectionSchedules, type SyncsDeps } from './syncs.js';

/**
 * `connection.deleted`: the connection's schedules and records go with it. Idempotent: a
 * redelivery deletes nothing more.
 */
export function connectionDeletedHandler(deps: Pick<SyncsDeps, 'schedules' | 'records' | 'logger'>) {
  return async (event: PayloadOf<typeof vaultContracts.connectionDeleted>): Promise<void> => {
    await removeConnectionSchedules(deps, event);
    const count = await deps.records.deleteConnection(environmentId(event.environment_id), event.id);
    if (count > 0) deps.logger.info('deleted the records of a deleted connection', { connection: event.id, count });
  };
}
