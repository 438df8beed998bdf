import type { Bus } from '@latchkey/bus';
import { gatewayContracts, vaultWebhookContracts, webhookContracts, type EnvironmentInfo, type InboundWebhook, type ResponseOf } from '@latchkey/contracts';
import { toAppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { InboundWebhookDoc } from '../db/inbound-webhook-model.js';
import type { InboundWebhookRepo } from '../db/inbound-webhook-repo.js';
import { forwardBody, providerPayload } from '../domain/payloads.js';
import { verifyProviderSignature } from '../domain/provider-signature.js';
import { connectionLookup } from '../domain/routing.js';
import { enqueueDeliveries } from './enqueue-deliveries.js';

type WebhookIntegration = ResponseOf<typeof vaultWebhookContracts.webhookIntegration>;

export interface InboundDeps {
  bus: Pick<Bus, 'request' | 'enqueue' | 'publish'>;
  logger: Logger;
  inbound: InboundWebhookRepo;
  environmentByPublicId(publicId: string): Promise<EnvironmentInfo>;
  integration(environmentId: string, uniqueKey: string): Promise<WebhookIntegration>;
}

/** Provider bodies up to this size ride along in `webhook.received`. */
const EVENT_PAYLOAD_BYTES = 256 * 1024;

/** The webhook-id of a provider webhook's forwarded copy: derived, so a redelivery reuses it. */
export const forwardWebhookId = (inboundId: string) => `msg_${inboundId.replace(/^iwh_/, '')}`;

/**
 * Handles one persisted provider webhook: verifies its signature with the integration's secret,
 * finds its connection, forwards it when the integration says so, announces `webhook.received`,
 * and records what happened. Idempotent: a redelivery repeats the same steps with the same ids.
 * A rejected webhook is recorded and acked (no retry can make it valid); a service that does not
 * answer makes the job come back later.
 */
export function inboundWebhookHandler(deps: InboundDeps) {
  return async (job: InboundWebhook): Promise<void> => {
    const receivedAt = new Date(job.received_at);
    const base = { _id: job.id, integration: job.integration, received_at: receivedAt, webhook_id: null, connection_id: null, signature: null, provider: null };

    let environment: EnvironmentInfo;
    try {
      environment = await deps.environmentByPublicId(job.environment_public_id);
    } catch (error) {
      if (toAppError(error).code !== 'unknown_environment') throw error;
      await deps.inbound.recordUnscoped({ ...base, environment_id: job.environment_public_id, status: 'rejected', reason: 'unknown_environment', processed_at: new Date() });
      return;
    }
    const scope = environmentId(environment.id);
    const record = (doc: Partial<InboundWebhookDoc> & Pick<InboundWebhookDoc, 'status' | 'reason'>) =>
      deps.inbound.record(scope, { ...base, ...doc, processed_at: new Date() });

    let integration: WebhookIntegration;
    try {
      integration = await deps.integration(environment.id, job.integration);
    } catch (error) {
      if (toAppError(error).code !== 'unknown_provider_config') throw error;
      await record({ status: 'rejected', reason: 'unknown_integration' });
      return;
    }

    const body = Buffer.from(job.body_base64, 'base64');
    const signature = verifyProviderSignature({
      declared: integration.signature,
      provider: integration.provider,
      secret: integration.webhook_secret,
      headers: job.headers,
      body,
    });
    if (signature === 'invalid' || signature === 'missing') {
      deps.logger.warn('rejected a provider webhook', { inbound: job.id, integration: job.integration, signature });
      await record({ status: 'rejected', reason: `${signature === 'invalid' ? 'bad' : 'missing'}_signature`, signature, provider: integration.provider });
      return;
    }

    const { payload, json } = providerPayload(body);
    const lookup = connectionLookup(job.query, json ? payload : null, integration.routing);
    const connectionId = lookup
      ? (await deps.bus.request(vaultWebhookContracts.matchConnection, { environment_id: environment.id, provider_config_key: job.integration, by: lookup })).connection_id
      : null;

    let status: InboundWebhookDoc['status'] = 'not_forwarded';
    let reason: string | null = integration.forward_webhooks ? 'no_webhook_url' : 'forward_webhooks_off';
    let webhookId: string | null = null;
    if (integration.forward_webhooks) {
      webhookId = forwardWebhookId(job.id);
      const made = await enqueueDeliveries(deps.bus, environment, {
        webhookId,
        kind: 'forward',
        body: forwardBody({ integration: job.integration, connectionId, payload }),
      });
      if (made > 0) [status, reason] = ['forwarded', null];
      else webhookId = null;
    }

    await deps.bus.publish(webhookContracts.received, {
      environment_id: environment.id,
      inbound_id: job.id,
      provider_config_key: job.integration,
      provider: integration.provider,
      connection_id: connectionId,
      ...(json && body.length <= EVENT_PAYLOAD_BYTES && { payload }),
    });
    await record({ status, reason, signature, provider: integration.provider, connection_id: connectionId, webhook_id: webhookId });
  };
}

/** The gateway's view of an environment, by public id (the inbound URL names it so). */
export const environmentByPublicIdLoader = (bus: Pick<Bus, 'request'>) => (publicId: string) =>
  bus.request(gatewayContracts.getEnvironment, { public_id: publicId });
