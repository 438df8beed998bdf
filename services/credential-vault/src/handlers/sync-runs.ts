import { syncContracts, type PayloadOf } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { VaultDeps } from '../domain/vault-deps.js';

type RunEvent = PayloadOf<typeof syncContracts.runCompleted>;

/**
 * `sync.run.failed` / `sync.run.completed`: a connection's `errors` show `{type: 'sync', log_id}`
 * (the run id) while the latest run of a sync and variant failed, and lose it when a later run
 * of that sync and variant succeeds. A run of a deleted connection changes nothing.
 */
export function syncRunHandler(deps: Pick<VaultDeps, 'connections'>, outcome: 'failed' | 'completed') {
  return async (event: RunEvent): Promise<void> => {
    const environment = environmentId(event.environment_id);
    const doc = await deps.connections.find(environment, event.provider_config_key, event.connection_id);
    if (!doc) return;
    await deps.connections.recordSyncRun(environment, doc._id, `${event.sync_name}:${event.variant}`, {
      failed_run: outcome === 'failed' ? event.run_id : null,
      finished_at: new Date(event.finished_at),
    });
  };
}
