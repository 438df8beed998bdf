import type { RequestOf, ResponseOf, webhookContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { DeliveryRepo } from '../db/delivery-repo.js';
import { logPageOf } from '../domain/log-page.js';

/** `webhook.attempts.list`: an environment's delivery attempts, newest first, for its operator. Never a body. */
export function listAttemptsHandler(deps: { deliveries: Pick<DeliveryRepo, 'list'> }) {
  return async (request: RequestOf<typeof webhookContracts.listAttempts>): Promise<ResponseOf<typeof webhookContracts.listAttempts>> => {
    const docs = await deps.deliveries.list(environmentId(request.environment_id), {
      ...logPageOf(request),
      ...(request.webhook_id === undefined ? {} : { webhookId: request.webhook_id }),
      ...(request.outcome === undefined ? {} : { outcome: request.outcome }),
    });
    return {
      data: docs.map((doc) => ({
        webhook_id: doc.webhook_id,
        target: doc.target,
        kind: doc.kind,
        url: doc.url,
        attempt: doc.attempt,
        status: doc.status,
        error: doc.error,
        duration_ms: doc.duration_ms,
        outcome: doc.outcome,
        next_attempt_at: doc.next_attempt_at?.toISOString() ?? null,
        at: doc.at.toISOString(),
      })),
    };
  };
}
