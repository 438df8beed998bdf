import type { Bus } from '@latchkey/bus';
import { gatewayContracts, type PayloadOf } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';

type EnvironmentEvent = typeof gatewayContracts.environmentCreated | typeof gatewayContracts.environmentUpdated;

/**
 * Publishes `environment.created` / `environment.updated` after the change is saved. The change
 * stands whatever JetStream does: the publish is tried again for up to `retryForMs` (a leader
 * election, a restart), then given up with a warning, so the caller is answered what was saved
 * (a new environment's signing key is shown only in that answer, and a retry would meet 409).
 * No service consumes these events today; a consumer that must not miss one needs an outbox.
 */
export async function announceEnvironmentChange(
  deps: { bus: Pick<Bus, 'publish'>; logger: Pick<Logger, 'warn'> },
  contract: EnvironmentEvent,
  payload: PayloadOf<EnvironmentEvent>,
  retryForMs: number,
): Promise<void> {
  try {
    await deps.bus.publish(contract, payload, { retryForMs });
  } catch (error) {
    deps.logger.warn('an environment change was saved but its event was not published', { subject: contract.subject, environment_id: payload.environment_id, error });
  }
}
