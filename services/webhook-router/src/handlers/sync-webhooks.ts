import type { EnvironmentInfo, PayloadOf, syncContracts } from '@latchkey/contracts';
import type { Bus } from '@latchkey/bus';
import { syncBody } from '../domain/payloads.js';
import { enqueueDeliveries } from '../domain/enqueue-deliveries.js';

export interface SyncWebhookDeps {
  bus: Pick<Bus, 'enqueue'>;
  environmentById(environmentId: string): Promise<EnvironmentInfo>;
}

/**
 * `sync.run.completed` → one `sync` webhook per model that changed (added, updated or deleted
 * records); a run that changed nothing sends none. The webhook-id comes from the run and model,
 * so a redelivered event makes no second delivery.
 */
export function syncRunCompletedHandler(deps: SyncWebhookDeps) {
  return async (event: PayloadOf<typeof syncContracts.runCompleted>): Promise<void> => {
    const changed = Object.entries(event.results).filter(([, counts]) => counts.added + counts.updated + counts.deleted > 0);
    if (changed.length === 0) return;
    const environment = await deps.environmentById(event.environment_id);
    for (const [model, counts] of changed) {
      await enqueueDeliveries(deps.bus, environment, {
        webhookId: `msg_sync_${event.run_id}_${model}`,
        kind: 'sync',
        body: syncBody({
          connectionId: event.connection_id,
          providerConfigKey: event.provider_config_key,
          syncName: event.sync_name,
          model,
          syncVariant: event.variant,
          responseResults: { added: counts.added, updated: counts.updated, deleted: counts.deleted },
          modifiedAfter: event.started_at,
          queryTimeStamp: event.finished_at,
        }),
      });
    }
  };
}
