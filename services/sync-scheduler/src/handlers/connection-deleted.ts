import { vaultContracts, type PayloadOf } from '@latchkey/contracts';
import type { JobMessage } from '@latchkey/bus';
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
 * How long after a connection's deletion its records are deleted once more: a records write that
 * took its scope before the deletion (a batch of 10,000 takes up to two minutes on FerretDB,
 * and goes on after its caller gave up) stores its records after the first pass.
 */
export const CONNECTION_DELETION_SECOND_PASS_MS = 5 * 60_000;

/**
 * `connection.deleted`: the connection's schedules and records go with it, both by the
 * connection's numeric id: a fact heard late (redelivered, or published by the vault's outbox
 * sweep) once the name belongs to a new connection leaves that connection's schedules. (A
 * schedule made before schedules kept the id goes only while no other connection holds the
 * name.) Until `CONNECTION_DELETION_SECOND_PASS_MS` after the fact was stored, the message is
 * asked for again then, and the records deleted once more. Idempotent: a redelivery deletes
 * nothing more.
 */
export function connectionDeletedHandler(deps: ConnectionDeletedDeps) {
  return async (event: PayloadOf<typeof vaultContracts.connectionDeleted>, msg?: { info: Pick<JobMessage['info'], 'timestampNanos'> }): Promise<void | { retryInMs: number }> => {
    await removeConnectionSchedules(deps, event, async () => {
      const holder = await deps.holderOf(event);
      return holder === null || holder === event.id;
    });
    const count = await deps.records.deleteConnection(environmentId(event.environment_id), event.id);
    if (count > 0) deps.logger.info('deleted the records of a deleted connection', { connection: event.id, count });
    if (msg === undefined) return;
    const left = msg.info.timestampNanos / 1e6 + CONNECTION_DELETION_SECOND_PASS_MS - Date.now();
    if (left > 0) return { retryInMs: Math.ceil(left) };
  };
}
