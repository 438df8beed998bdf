import type { JobMessage } from '@latchkey/bus';
import type { PayloadOf, vaultContracts } from '@latchkey/contracts';
import { authBody, type AuthWebhook } from '../domain/payloads.js';
import { enqueueDeliveries, type DeliveryDeps } from '../domain/enqueue-deliveries.js';

type ConnectionCreated = PayloadOf<typeof vaultContracts.connectionCreated>;
type RefreshFailed = PayloadOf<typeof vaultContracts.connectionRefreshFailed>;

/** The header in which a publisher names its message, for JetStream to drop a second copy. */
const MSG_ID_HEADER = 'Nats-Msg-Id';
/** What an id from elsewhere may be to go into a webhook-id (at most 128 characters). */
const ID_PART = /^[A-Za-z0-9._:-]{1,96}$/;

/**
 * The webhook-id of the auth webhook of a `connection.created`: the same for every copy of the
 * event, and never another event's, so a receiver that drops duplicates drops only those. The
 * vault names each fact (`Nats-Msg-Id`, its outbox's id, kept when its sweep publishes the fact
 * again); without a name, the event's place in its stream and the time it was stored there (a
 * stream made again starts its sequence over, not its clock).
 */
function eventWebhookId(msg: JobMessage): string {
  const factId = msg.headers?.get(MSG_ID_HEADER);
  if (factId && ID_PART.test(factId)) return `msg_evt_${factId}`;
  return `msg_evt_${msg.info.stream}_${msg.seq}_${String(msg.info.timestampNanos)}`;
}

/** The webhook-id of a failed refresh's auth webhook: its refresh log entry's id, made for that failure alone. */
const refreshWebhookId = (event: RefreshFailed, msg: JobMessage) => (ID_PART.test(event.log_id) ? `msg_refresh_${event.log_id}` : eventWebhookId(msg));

async function send(deps: DeliveryDeps, environmentIdOf: string, webhookId: string, webhook: Omit<AuthWebhook, 'environment'>): Promise<void> {
  const environment = await deps.environmentById(environmentIdOf);
  if (!environment.send_auth_webhooks) return;
  await enqueueDeliveries(deps.bus, environment, { webhookId, kind: 'auth', body: authBody({ ...webhook, environment: environment.name }) });
}

/** `connection.created` from a connect flow (creation or override) → an auth webhook; imports send none. */
export function connectionCreatedHandler(deps: DeliveryDeps) {
  return async (event: ConnectionCreated, msg: JobMessage): Promise<void> => {
    if (!event.operation) return;
    await send(deps, event.environment_id, eventWebhookId(msg), {
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
    await send(deps, event.environment_id, refreshWebhookId(event, msg), {
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
