import type { Bus } from '@latchkey/bus';
import { gatewayContracts, type EnvironmentInfo, type WebhookDelivery } from '@latchkey/contracts';

/**
 * What the delivery tests share: the gateway's answers about environments, played under the
 * gateway's identity, and a delivery job as the other services enqueue it.
 */

/** Serves `gateway.environment.get` and the signing keys: each environment's primary URL is `webhookUrlOf(id)`. */
export async function serveEnvironments(gateway: Bus, webhookUrlOf: (environmentId: string) => string | null): Promise<void> {
  gateway.serve(gatewayContracts.getEnvironment, (request) => {
    const id = 'environment_id' in request ? request.environment_id : request.public_id;
    return {
      id,
      public_id: id,
      name: 'dev',
      account_id: 'acc_a',
      webhook_url: webhookUrlOf(id),
      webhook_url_secondary: null,
      send_auth_webhooks: false,
      callback_url: null,
      variables: [],
    };
  });
  gateway.serve(gatewayContracts.getSigningKeys, () => ({ keys: [`whsec_${Buffer.alloc(32, 7).toString('base64')}`] }));
  await gateway.flush();
}

/** A forwarded webhook's delivery to an environment's primary URL. */
export const deliveryOf = (webhookId: string, environmentId: string, url: string): WebhookDelivery => ({
  webhook_id: webhookId,
  environment_id: environmentId,
  target: 'primary',
  url,
  kind: 'forward',
  body: JSON.stringify({ webhookId }),
  created_at: new Date().toISOString(),
});

/** An environment as the gateway describes it, with one primary URL. */
export const environmentInfo = (fields: Partial<EnvironmentInfo> = {}): EnvironmentInfo => ({
  id: 'env_a',
  public_id: 'pub_a',
  name: 'dev',
  account_id: 'acc_a',
  webhook_url: 'https://hooks.example.com/latchkey',
  webhook_url_secondary: null,
  send_auth_webhooks: false,
  callback_url: null,
  variables: [],
  ...fields,
});

/** A handler's dependencies that keep the deliveries it makes instead of enqueuing them. */
export function keepingDeliveries(environment: EnvironmentInfo) {
  const made: WebhookDelivery[] = [];
  const deps = {
    bus: { enqueue: async (_contract: unknown, payload: WebhookDelivery) => void made.push(payload) },
    environmentById: async () => environment,
  };
  return { made, deps };
}
