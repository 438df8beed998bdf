import type { JobMessage } from '@latchkey/bus';
import type { PayloadOf, vaultContracts } from '@latchkey/contracts';
import { authBody, type AuthWebhook } from '../domain/payloads.js';
import { enqueueDeliveries, type DeliveryDeps } from '../domain/enqueue-deliveries.js';

type ConnectionCreated = PayloadOf<typeof vaultContracts.connectionCreated>;
type RefreshFailed = PayloadOf<typeof vaultContracts.connectionRefreshFailed>;

/** The webhook-id of an auth webhook: from the event's place in the stream, so a redelivery reuses it. */
const eventWebhookId = (msg: JobMessage) => `msg_evt_${msg.info.stream}_${msg.seq}`;

async function send(deps: DeliveryDeps, environmentIdOf: string, msg: JobMessage, webhook: Omit<AuthWebhook, 'environment'>): Promise<void> {
  const environment = await deps.environmentById(environmentIdOf);
  if (!environment.send_auth_webhooks) return;
  await enqueueDeliveries(deps.bus, environment, { webhookId: eventWebhookId(msg), kind: 'auth', body: authBody({ ...webhook, environment: environment.name }) });
}

/** `connection.created` from a connect flow (creation or override) → an auth webhook; imports send none. */
export function connectionCreatedHandler(deps: DeliveryDeps) {
  return async (event: ConnectionCreated, msg: JobMessage): Promise<void> => {
    if (!event.operation) return;
    await send(deps, event.environment_id, msg, {
      operation: event.operation,
      success: true,
      connectionId: event.connection_id,
      providerConfigKey: event.provider_config_key,
      provider: event.provider,
      tags: event.tags ?? {},
    });
  };
}

/** `connection.refresh_failed` → an auth webhook with `success: false` and the error's code and message. */
export function refreshFailedHandler(deps: DeliveryDeps) {
  return async (event: RefreshFailed, msg: JobMessage): Promise<void> => {
    await send(deps, event.environment_id, msg, {
      operation: 'refresh',
      success: false,
      connectionId: event.connection_id,
      providerConfigKey: event.provider_config_key,
      provider: event.provider,
      tags: event.tags ?? {},
      error: { type: event.error.code, description: event.error.message },
    });
  };
}
