import type { actionContracts, PayloadOf } from '@latchkey/contracts';
import { asyncActionBody } from '../domain/payloads.js';
import { enqueueDeliveries, type DeliveryDeps } from '../domain/enqueue-deliveries.js';

type AsyncCompleted = PayloadOf<typeof actionContracts.asyncCompleted>;

/**
 * `action.async_completed` → an `async_action` webhook to the environment's URL(s), whatever
 * the environment's auth-webhook setting: the customer queued the action and waits for it. The
 * webhook-id comes from the run's id, so a redelivered event makes no second webhook.
 */
export function asyncActionCompletedHandler(deps: DeliveryDeps) {
  return async (event: AsyncCompleted): Promise<void> => {
    const environment = await deps.environmentById(event.environment_id);
    await enqueueDeliveries(deps.bus, environment, {
      webhookId: `msg_action_${event.id}`,
      kind: 'async_action',
      body: asyncActionBody({
        connectionId: event.connection_id,
        providerConfigKey: event.provider_config_key,
        actionName: event.action_name,
        id: event.id,
        statusUrl: event.statusUrl,
        success: event.success,
        ...(event.error ? { error: event.error } : {}),
        completedAt: event.completed_at,
      }),
    });
  };
}
