import { vaultContracts, type PayloadOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import { removeConnectionSchedules, type SyncsDeps } from './syncs.js';

/** The numeric id of the connection that holds a name now, or null when none does (the vault's answer). */
export type ConnectionHolder = (event: { environment_id: string; provider_config_key: string; connection_id: string }) => Promise<number | null>;

export interface ConnectionDeletedDeps extends Pick<SyncsDeps, 'schedules' | 'records' | 'logger'> {
  holderOf: ConnectionHolder;
}

/** `holderOf` as the vault answers it. */
export function connectionHolder(deps: Pick<SyncsDeps, 'bus'>): ConnectionHolder {
  return async ({ environment_id, provider_config_key, connection_id }) => {
    try {
      return (await deps.bus.request(vaultContracts.resolveConnection, { environment_id, provider_config_key, connection_id })).id;
    } catch (error) {
      if (error instanceof AppError && (error.code === 'unknown_connection' || error.code === 'unknown_provider_config')) return null;
      throw error;
    }
  };
}

/**
 * `connection.deleted`: the connection's schedules and records go with it, both by the
 * connection's numeric id: a fact heard late (redelivered, or published by the vault's outbox
 * sweep) once the name belongs to a new connection leaves that connection's schedules. (A
 * schedule made before schedules kept the id goes only while no other connection holds the
 * name.) Idempotent: a redelivery deletes nothing more.
 */
export function connectionDeletedHandler(deps: ConnectionDeletedDeps) {
  return async (event: PayloadOf<typeof vaultContracts.connectionDeleted>): Promise<void> => {
    await removeConnectionSchedules(deps, event, async () => {
      const holder = await deps.holderOf(event);
      return holder === null || holder === event.id;
    });
    const count = await deps.records.deleteConnection(environmentId(event.environment_id), event.id);
    if (count > 0) deps.logger.info('deleted the records of a deleted connection', { connection: event.id, count });
  };
}
