import type { RequestOf, ResponseOf, webhookContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { InboundWebhookRepo } from '../db/inbound-webhook-repo.js';
import { logPageOf } from '../domain/log-page.js';

/** `webhook.inbound_log.list`: what became of an environment's provider webhooks, newest first, for its operator. */
export function listInboundLogHandler(deps: { inbound: Pick<InboundWebhookRepo, 'list'> }) {
  return async (request: RequestOf<typeof webhookContracts.listInbound>): Promise<ResponseOf<typeof webhookContracts.listInbound>> => {
    const docs = await deps.inbound.list(environmentId(request.environment_id), {
      ...logPageOf(request),
      ...(request.status === undefined ? {} : { status: request.status }),
    });
    return {
      data: docs.map((doc) => ({
        id: doc._id,
        integration: doc.integration,
        provider: doc.provider,
        status: doc.status,
        reason: doc.reason,
        signature: doc.signature,
        connection_id: doc.connection_id,
        webhook_id: doc.webhook_id,
        received_at: doc.received_at.toISOString(),
        processed_at: doc.processed_at.toISOString(),
      })),
    };
  };
}
