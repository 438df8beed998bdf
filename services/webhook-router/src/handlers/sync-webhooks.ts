import { createHash } from 'node:crypto';
import { webhookDelivery, type EnvironmentInfo, type PayloadOf, type syncContracts } from '@latchkey/contracts';
import type { Bus } from '@latchkey/bus';
import { syncBody } from '../domain/payloads.js';
import { enqueueDeliveries } from '../domain/enqueue-deliveries.js';

export interface SyncWebhookDeps {
  bus: Pick<Bus, 'enqueue'>;
  environmentById(environmentId: string): Promise<EnvironmentInfo>;
}

/**
 * The webhook-id of a run's webhook for one model: `msg_sync_<run>_<model>` when the delivery
 * contract takes it, else `msg_sync_` and a SHA-256 of the two (73 characters). An `onWebhook`
 * run's id holds the sync's name (up to 100 characters), so with a long model name the plain form
 * passes the contract's 128 and its delivery could not be enqueued. The plain form is kept where
 * it fits: it tells an operator the run and model, and the ids of webhooks already sent, which a
 * redelivered event made after an upgrade must repeat, stay what they were. Both forms depend on
 * the run and model alone, so a redelivered event makes the same id; they never meet, a hash
 * having no `_`.
 */
function syncWebhookId(runId: string, model: string): string {
  const plain = `msg_sync_${runId}_${model}`;
  if (webhookDelivery.shape.webhook_id.safeParse(plain).success) return plain;
  return `msg_sync_${createHash('sha256').update(`${runId}\0${model}`).digest('hex')}`;
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
        webhookId: syncWebhookId(event.run_id, model),
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
