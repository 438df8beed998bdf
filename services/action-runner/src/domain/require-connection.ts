import type { Bus } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';

export type ConnectionRef = { environment_id: string; provider_config_key: string; connection_id: string };

/** The connection must exist in the integration (404 `unknown_connection` otherwise); no credentials are read, nothing is refreshed. */
export async function requireConnection(bus: Pick<Bus, 'request'>, request: ConnectionRef): Promise<void> {
  await bus.request(vaultContracts.resolveConnection, {
    environment_id: request.environment_id,
    connection_id: request.connection_id,
    provider_config_key: request.provider_config_key,
  });
}
