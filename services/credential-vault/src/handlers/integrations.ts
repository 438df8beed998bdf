import { randomUUID } from 'node:crypto';
import { callerOf, type BusMessage } from '@latchkey/bus';
import { vaultContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import type { IntegrationDoc } from '../db/integration-model.js';
import { normalHosts } from '../domain/integrations.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';
import { integrationListItem } from '../domain/views.js';

/** The list form only: client credentials are read one integration at a time, when asked for. */
export function listIntegrationsHandler(deps: Pick<VaultDeps, 'integrations' | 'logoUrl'>) {
  return async ({ environment_id }: RequestOf<typeof vaultContracts.listIntegrations>) =>
    (await deps.integrations.list(environmentId(environment_id))).map((doc) => ({
      ...integrationListItem(doc, deps.logoUrl(doc.provider)),
      ...(doc.display_name ? { display_name: doc.display_name } : {}),
    }));
}

export function createIntegrationHandler(deps: Pick<VaultDeps, 'integrations' | 'providers' | 'logoUrl'> & Pick<VaultServices, 'integrationService'>) {
  return async (request: RequestOf<typeof vaultContracts.createIntegration>) => {
    const { environment_id, provider, unique_key } = request;
    if (!deps.providers.get(provider)) {
      throw new AppError('invalid_body', `Unknown provider "${provider}"`, {
        errors: [{ code: 'unknown_provider', message: 'not in the provider catalog (GET /providers)', path: 'provider' }],
      });
    }
    const id = `int_${randomUUID()}`;
    const now = new Date();
    const doc = await deps.integrations.insert(environmentId(environment_id), {
      _id: id,
      unique_key,
      provider,
      display_name: request.display_name ?? null,
      credentials: request.credentials ? await deps.integrationService.sealClientCredentials(environmentId(environment_id), id, request.credentials) : null,
      integration_config: request.integration_config ?? {},
      custom: request.custom ?? {},
      forward_webhooks: request.forward_webhooks ?? true,
      accept_unsigned_webhooks: request.accept_unsigned_webhooks ?? false,
      allowed_hosts: normalHosts(request.allowed_hosts ?? []),
      webhook_secret: await deps.integrationService.newWebhookSecret(environmentId(environment_id), id),
      created_at: now,
      updated_at: now,
    });
    return integrationListItem(doc, deps.logoUrl(doc.provider));
  };
}

export function getIntegrationHandler(deps: Pick<VaultDeps, 'logoUrl'> & Pick<VaultServices, 'integrationService'>) {
  return async ({ environment_id, unique_key, include_webhook, include_credentials }: RequestOf<typeof vaultContracts.getIntegration>, msg: Pick<BusMessage, 'subject'>) => {
    // The OAuth client secret is shown to customers (`GET /integrations/{key}`); no other service
    // uses it (functions get the webhook secret, to check a provider's signature themselves).
    if (include_credentials && callerOf(vaultContracts.getIntegration, msg) !== 'gateway') {
      throw new AppError('forbidden', "Only the gateway reads an integration's client credentials");
    }
    const environment = environmentId(environment_id);
    const doc = await deps.integrationService.find(environment, unique_key);
    const view = {
      ...integrationListItem(doc, deps.logoUrl(doc.provider)),
      ...(doc.display_name ? { display_name: doc.display_name } : {}),
      forward_webhooks: doc.forward_webhooks,
      accept_unsigned_webhooks: doc.accept_unsigned_webhooks === true,
      allowed_hosts: doc.allowed_hosts ?? [],
      integration_config: doc.integration_config ?? {},
      custom: doc.custom ?? {},
    };
    return {
      ...view,
      ...(include_credentials ? { credentials: await deps.integrationService.clientCredentials(doc) } : {}),
      ...(include_webhook ? { webhookSecret: await deps.integrationService.webhookSecret(environment, doc) } : {}),
    };
  };
}

export function updateIntegrationHandler(deps: Pick<VaultDeps, 'integrations' | 'connections' | 'bus' | 'logoUrl'> & Pick<VaultServices, 'integrationService' | 'lifecycle'>) {
  return async ({ environment_id, unique_key, patch }: RequestOf<typeof vaultContracts.updateIntegration>) => {
    const environment = environmentId(environment_id);
    const doc = await deps.integrationService.find(environment, unique_key);
    const renamed = patch.unique_key !== undefined && patch.unique_key !== doc.unique_key;
    const fields: Partial<IntegrationDoc> = {};
    if (renamed) fields.unique_key = patch.unique_key!;
    if (patch.display_name !== undefined) fields.display_name = patch.display_name;
    if (patch.forward_webhooks !== undefined) fields.forward_webhooks = patch.forward_webhooks;
    if (patch.accept_unsigned_webhooks !== undefined) fields.accept_unsigned_webhooks = patch.accept_unsigned_webhooks;
    if (patch.allowed_hosts !== undefined) fields.allowed_hosts = normalHosts(patch.allowed_hosts);
    if (patch.integration_config !== undefined) fields.integration_config = patch.integration_config;
    if (patch.custom !== undefined) fields.custom = patch.custom;
    if (patch.credentials !== undefined) {
      fields.credentials = await deps.integrationService.sealClientCredentials(environment, doc._id, patch.credentials);
    }
    // A rename ends the old key: what was deployed under it goes (`integration.removed`). Its
    // checks and its write run under the integration's members key, which an insert of a
    // connection takes too: none lands under the old key between the count and the rename.
    const update = () => deps.integrations.update(environment, doc._id, fields);
    const rename = () =>
      deps.integrations.holdingMembers(doc._id, async (holding) => {
        if ((await deps.connections.countForIntegration(environment, doc._id)) > 0) {
          throw new AppError('integration_has_connections', `Integration "${unique_key}" has connections; it cannot be renamed`);
        }
        if (await deps.integrations.findByKey(environment, patch.unique_key!)) {
          throw new AppError('duplicate_provider_config', `An integration with unique_key "${patch.unique_key}" exists already`);
        }
        holding.assertHeld();
        await update();
      });
    await (renamed ? deps.lifecycle.announceKeyEnd(doc, rename) : update());
    // Proxy replicas cache what a call injects and where it may go: what changes either drops
    // the cached credentials of every connection of the integration.
    if (fields.allowed_hosts !== undefined || fields.credentials !== undefined) {
      for (const connection of await deps.connections.listForIntegration(environment, doc._id)) {
        deps.bus.broadcast(vaultContracts.connectionChanged, { id: connection._id });
      }
    }
    const updated = await deps.integrationService.find(environment, fields.unique_key ?? unique_key);
    return integrationListItem(updated, deps.logoUrl(updated.provider));
  };
}

/**
 * Deletes the integration and each of its connections, announcing every deletion and the key's
 * end. The integration goes under its members key: a connection's insert either lands before
 * (and the second sweep deletes it) or finds the integration gone.
 */
export function deleteIntegrationHandler(deps: Pick<VaultDeps, 'integrations' | 'connections'> & Pick<VaultServices, 'integrationService' | 'connectionService' | 'lifecycle'>) {
  return async ({ environment_id, unique_key }: RequestOf<typeof vaultContracts.deleteIntegration>) => {
    const environment = environmentId(environment_id);
    const doc = await deps.integrationService.find(environment, unique_key);
    const sweep = async () => {
      for (const connection of await deps.connections.listForIntegration(environment, doc._id)) await deps.connectionService.remove(environment, connection);
    };
    await sweep();
    await deps.lifecycle.announceKeyEnd(doc, () => deps.integrations.holdingMembers(doc._id, () => deps.integrations.remove(environment, doc._id)));
    await sweep();
    return { success: true as const };
  };
}
