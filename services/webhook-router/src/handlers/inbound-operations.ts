import type { OperationLog } from '@latchkey/bus';
import { currentRequestId } from '@latchkey/logger';
import type { InboundWebhookRepo } from '../db/inbound-webhook-repo.js';

/**
 * The inbound log with the operations log beside it: each provider webhook recorded under an
 * environment is also a `webhook_inbound` operation, from its receipt to its outcome. A
 * rejection is a failure whose code is the reason (`bad_signature`, `replayed`, ...); never a
 * header or body. Webhooks naming no known environment are not logged: no environment may see them.
 */
export function withInboundOperations(inbound: InboundWebhookRepo, operations: Pick<OperationLog, 'record'>): InboundWebhookRepo {
  return {
    ...inbound,
    record: async (environment, doc) => {
      await inbound.record(environment, doc);
      const requestId = currentRequestId();
      const rejected = doc.status === 'rejected';
      operations.record({
        type: 'webhook_inbound',
        environment_id: environment,
        status: rejected ? 'failure' : 'success',
        started_at: doc.received_at.toISOString(),
        duration_ms: Math.max(0, doc.processed_at.getTime() - doc.received_at.getTime()),
        integration_id: doc.integration,
        ...(doc.connection_id === null ? {} : { connection_id: doc.connection_id }),
        ...(requestId === undefined ? {} : { request_id: requestId }),
        ...(rejected ? { error: { code: (doc.reason ?? 'rejected').slice(0, 64), message: 'The webhook was rejected' } } : {}),
      });
    },
  };
}
