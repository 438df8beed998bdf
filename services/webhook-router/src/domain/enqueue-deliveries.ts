import type { Bus } from '@latchkey/bus';
import { webhookContracts, type EnvironmentInfo, type WebhookDelivery } from '@latchkey/contracts';

/** What a handler that sends an environment's webhooks needs: the environment's settings, and the durable queue. */
export interface DeliveryDeps {
  bus: Pick<Bus, 'enqueue'>;
  environmentById(environmentId: string): Promise<EnvironmentInfo>;
}

/** Room in a delivery job for its other fields (URL, ids, times) and the message's headers. */
const DELIVERY_HEADROOM_BYTES = 8 * 1024;

/**
 * Whether a body fits in a delivery job, where it travels as JSON text: a provider's binary body
 * grows up to six-fold once escaped, past what the gateway's bound on the raw body allows for.
 */
export function fitsDelivery(bus: Pick<Bus, 'maxPayload'>, body: string): boolean {
  return Buffer.byteLength(JSON.stringify(body)) + DELIVERY_HEADROOM_BYTES <= bus.maxPayload;
}

/** The environment's webhook targets, in the order their deliveries are made. */
const TARGETS = ['primary', 'secondary'] as const;

/** Where a target's webhooks go now: the environment's setting for it; null when the setting is cleared. */
export function targetUrl(environment: Pick<EnvironmentInfo, 'webhook_url' | 'webhook_url_secondary'>, target: WebhookDelivery['target']): string | null {
  return (target === 'primary' ? environment.webhook_url : environment.webhook_url_secondary) || null;
}

/**
 * Makes one durable delivery per webhook URL of the environment (primary, then secondary), all
 * under one webhook-id. JetStream drops a second copy of the same delivery (a redelivered
 * source message), so each is made once. Returns how many were made (0: no URL configured).
 */
export async function enqueueDeliveries(
  bus: Pick<Bus, 'enqueue'>,
  environment: Pick<EnvironmentInfo, 'id' | 'webhook_url' | 'webhook_url_secondary'>,
  input: { webhookId: string; kind: WebhookDelivery['kind']; body: string },
): Promise<number> {
  let made = 0;
  for (const target of TARGETS) {
    const url = targetUrl(environment, target);
    if (!url) continue;
    await bus.enqueue(
      webhookContracts.deliver,
      { webhook_id: input.webhookId, environment_id: environment.id, target, url, kind: input.kind, body: input.body, created_at: new Date().toISOString() },
      { msgId: `${input.webhookId}:${target}` },
    );
    made += 1;
  }
  return made;
}
