import { vaultWebhookContracts, type RequestOf, type ResponseOf } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';

/** Keys become field paths in a query: a `.` or a leading `$` could reach elsewhere. */
const SAFE_KEY = /^[^.$][^.]*$/;

/** `vault.webhooks.integration`: the integration as the webhook router needs it, secret included. */
export function webhookIntegrationHandler(deps: Pick<VaultDeps, 'providers'> & Pick<VaultServices, 'integrationService'>) {
  return async ({ environment_id, unique_key }: RequestOf<typeof vaultWebhookContracts.webhookIntegration>): Promise<ResponseOf<typeof vaultWebhookContracts.webhookIntegration>> => {
    const environment = environmentId(environment_id);
    const doc = await deps.integrationService.find(environment, unique_key);
    const webhook = deps.providers.get(doc.provider)?.webhook;
    return {
      provider: doc.provider,
      forward_webhooks: doc.forward_webhooks,
      accept_unsigned_webhooks: doc.accept_unsigned_webhooks === true,
      webhook_secret: await deps.integrationService.webhookSecret(environment, doc),
      signature: webhook
        ? {
            header: webhook.signature_header,
            algorithm: webhook.algorithm,
            encoding: webhook.encoding,
            ...(webhook.prefix !== undefined && { prefix: webhook.prefix }),
            ...(webhook.signed_content !== undefined && { signed_content: webhook.signed_content }),
            ...(webhook.timestamp_header !== undefined && { timestamp_header: webhook.timestamp_header }),
            ...(webhook.id_header !== undefined && { id_header: webhook.id_header }),
          }
        : null,
      routing: webhook?.routing ? { ...webhook.routing } : null,
    };
  };
}

/**
 * `vault.webhooks.match_many`: `vault.webhooks.match` for a batch of one integration's webhooks.
 * The ids are looked up in one query; each distinct config / metadata value once.
 */
export function matchConnectionsHandler(deps: Pick<VaultDeps, 'connections'>) {
  return async ({ environment_id, provider_config_key, lookups }: RequestOf<typeof vaultWebhookContracts.matchConnections>): Promise<ResponseOf<typeof vaultWebhookContracts.matchConnections>> => {
    const environment = environmentId(environment_id);
    const ids = [...new Set(lookups.flatMap((by) => ('connection_id' in by ? [by.connection_id] : [])))];
    const found = new Set(ids.length === 0 ? [] : (await deps.connections.findMany(environment, provider_config_key, ids)).map((doc) => doc.connection_id));
    const byValue = new Map<string, Promise<string | null>>();
    const connectionIds = await Promise.all(
      lookups.map(async (by) => {
        if ('connection_id' in by) return found.has(by.connection_id) ? by.connection_id : null;
        if (!SAFE_KEY.test(by.key)) return null;
        const key = JSON.stringify([by.field, by.key, by.value]);
        let match = byValue.get(key);
        if (!match) {
          match = deps.connections.findByField(environment, provider_config_key, by.field, by.key, by.value).then((doc) => doc?.connection_id ?? null);
          byValue.set(key, match);
        }
        return match;
      }),
    );
    return { connection_ids: connectionIds };
  };
}

/** `vault.webhooks.match`: one webhook's connection, or null (the webhook is still forwarded); a batch of one. */
export function matchConnectionHandler(deps: Pick<VaultDeps, 'connections'>) {
  const matchMany = matchConnectionsHandler(deps);
  return async ({ by, ...integration }: RequestOf<typeof vaultWebhookContracts.matchConnection>): Promise<ResponseOf<typeof vaultWebhookContracts.matchConnection>> => {
    const { connection_ids } = await matchMany({ ...integration, lookups: [by] });
    return { connection_id: connection_ids[0] ?? null };
  };
}
