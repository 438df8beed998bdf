import { randomBytes, randomUUID } from 'node:crypto';
import { vaultContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { z } from 'zod';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { connectionEvent, integrationListItem } from '../domain/views.js';
import { announcePreDeletion } from './connections.js';

/** The field names that bind each encrypted integration value to its place. */
export const INTEGRATION_PLACES = {
  credentials: { field: 'integration.credentials' },
  webhook_secret: { field: 'integration.webhook_secret' },
} as const;
const CREDENTIALS = INTEGRATION_PLACES.credentials;
const WEBHOOK_SECRET = INTEGRATION_PLACES.webhook_secret;
const stringMap = z.record(z.string(), z.string());

/** Allowed hosts as the proxy compares them: lower-case, each once. */
const normalHosts = (hosts: readonly string[]) => [...new Set(hosts.map((host) => host.toLowerCase()))];

/** The integration, or `unknown_provider_config`. */
export async function findIntegration(deps: Pick<VaultDeps, 'integrations'>, environment: EnvironmentId, uniqueKey: string) {
  const integration = await deps.integrations.findByKey(environment, uniqueKey);
  if (!integration) throw new AppError('unknown_provider_config', `No integration with unique_key "${uniqueKey}"`);
  return integration;
}

function logoOf(deps: Pick<VaultDeps, 'logoUrl'>, doc: IntegrationDoc): string {
  return deps.logoUrl(doc.provider);
}

/** The integration's client credentials, decrypted (empty when none were given). */
export async function integrationCredentials(deps: Pick<VaultDeps, 'cipher'>, doc: IntegrationDoc): Promise<Record<string, string>> {
  if (!doc.credentials) return {};
  return deps.cipher.decryptJson(environmentId(doc.environment_id), { integrationId: doc._id, ...CREDENTIALS }, doc.credentials, stringMap);
}

/** The list form only: client credentials are read one integration at a time, when asked for. */
export function listIntegrationsHandler(deps: VaultDeps) {
  return async ({ environment_id }: RequestOf<typeof vaultContracts.listIntegrations>) =>
    (await deps.integrations.list(environmentId(environment_id))).map((doc) => ({
      ...integrationListItem(doc, logoOf(deps, doc)),
      ...(doc.display_name ? { display_name: doc.display_name } : {}),
    }));
}

export function createIntegrationHandler(deps: VaultDeps) {
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
      credentials: request.credentials
        ? await deps.cipher.encryptJson(environmentId(environment_id), { integrationId: id, ...CREDENTIALS }, request.credentials)
        : null,
      integration_config: request.integration_config ?? {},
      custom: request.custom ?? {},
      forward_webhooks: request.forward_webhooks ?? true,
      accept_unsigned_webhooks: request.accept_unsigned_webhooks ?? false,
      allowed_hosts: normalHosts(request.allowed_hosts ?? []),
      webhook_secret: await newWebhookSecret(deps, environmentId(environment_id), id),
      created_at: now,
      updated_at: now,
    });
    return integrationListItem(doc, logoOf(deps, doc));
  };
}

export function getIntegrationHandler(deps: VaultDeps) {
  return async ({ environment_id, unique_key, include_webhook, include_credentials }: RequestOf<typeof vaultContracts.getIntegration>) => {
    const environment = environmentId(environment_id);
    const doc = await findIntegration(deps, environment, unique_key);
    const view = {
      ...integrationListItem(doc, logoOf(deps, doc)),
      ...(doc.display_name ? { display_name: doc.display_name } : {}),
      forward_webhooks: doc.forward_webhooks,
      accept_unsigned_webhooks: doc.accept_unsigned_webhooks === true,
      allowed_hosts: doc.allowed_hosts ?? [],
      integration_config: doc.integration_config ?? {},
      custom: doc.custom ?? {},
    };
    return {
      ...view,
      ...(include_credentials ? { credentials: await integrationCredentials(deps, doc) } : {}),
      ...(include_webhook ? { webhookSecret: await webhookSecretOf(deps, environment, doc) } : {}),
    };
  };
}

/** A new webhook secret, sealed for its integration. */
function newWebhookSecret(deps: Pick<VaultDeps, 'cipher'>, environment: EnvironmentId, integrationId: string): Promise<string> {
  return deps.cipher.encrypt(environment, { integrationId, ...WEBHOOK_SECRET }, randomBytes(32).toString('hex'));
}

/**
 * The integration's webhook secret, the same for all its connections. Every integration gets
 * one when it is created (older ones once, at start: `backfillWebhookSecrets`); a read never
 * writes, so it never moves `updated_at`.
 */
export async function webhookSecretOf(deps: Pick<VaultDeps, 'cipher' | 'integrations'>, environment: EnvironmentId, doc: IntegrationDoc): Promise<string> {
  const place = { integrationId: doc._id, ...WEBHOOK_SECRET };
  let sealed = doc.webhook_secret;
  if (!sealed) {
    // Only an integration made by an older vault while this one started can lack it.
    await deps.integrations.setWebhookSecretIfMissing(environment, doc._id, await newWebhookSecret(deps, environment, doc._id));
    sealed = (await deps.integrations.findByKey(environment, doc.unique_key))?.webhook_secret ?? null;
    if (!sealed) throw new AppError('unknown_provider_config', `No integration with unique_key "${doc.unique_key}"`);
  }
  return deps.cipher.decrypt(environment, place, sealed);
}

/** Once at start: integrations stored before secrets were made at creation get theirs. */
export async function backfillWebhookSecrets(deps: Pick<VaultDeps, 'cipher' | 'integrations'>): Promise<number> {
  let filled = 0;
  for (const id of await deps.integrations.environments()) {
    const environment = environmentId(id);
    for (const doc of await deps.integrations.withoutWebhookSecret(environment)) {
      if (await deps.integrations.setWebhookSecretIfMissing(environment, doc._id, await newWebhookSecret(deps, environment, doc._id))) filled++;
    }
  }
  return filled;
}

export function updateIntegrationHandler(deps: VaultDeps) {
  return async ({ environment_id, unique_key, patch }: RequestOf<typeof vaultContracts.updateIntegration>) => {
    const environment = environmentId(environment_id);
    const doc = await findIntegration(deps, environment, unique_key);
    const renamed = patch.unique_key !== undefined && patch.unique_key !== doc.unique_key;
    if (renamed && (await deps.connections.countForIntegration(environment, doc._id)) > 0) {
      throw new AppError('integration_has_connections', `Integration "${unique_key}" has connections; it cannot be renamed`);
    }
    if (renamed && (await deps.integrations.findByKey(environment, patch.unique_key!))) {
      throw new AppError('duplicate_provider_config', `An integration with unique_key "${patch.unique_key}" exists already`);
    }
    const fields: Partial<IntegrationDoc> = {};
    if (renamed) fields.unique_key = patch.unique_key!;
    if (patch.display_name !== undefined) fields.display_name = patch.display_name;
    if (patch.forward_webhooks !== undefined) fields.forward_webhooks = patch.forward_webhooks;
    if (patch.accept_unsigned_webhooks !== undefined) fields.accept_unsigned_webhooks = patch.accept_unsigned_webhooks;
    if (patch.allowed_hosts !== undefined) fields.allowed_hosts = normalHosts(patch.allowed_hosts);
    if (patch.integration_config !== undefined) fields.integration_config = patch.integration_config;
    if (patch.custom !== undefined) fields.custom = patch.custom;
    if (patch.credentials !== undefined) {
      fields.credentials = await deps.cipher.encryptJson(environment, { integrationId: doc._id, ...CREDENTIALS }, patch.credentials);
    }
    await deps.integrations.update(environment, doc._id, fields);
    // Proxy replicas cache what a call injects and where it may go: what changes either drops
    // the cached credentials of every connection of the integration.
    if (fields.allowed_hosts !== undefined || fields.credentials !== undefined) {
      for (const connection of await deps.connections.listForIntegration(environment, doc._id)) {
        deps.bus.broadcast(vaultContracts.connectionChanged, { id: connection._id });
      }
    }
    const updated = await findIntegration(deps, environment, fields.unique_key ?? unique_key);
    return integrationListItem(updated, logoOf(deps, updated));
  };
}

/** Deletes the integration and each of its connections, announcing every deletion. */
export function deleteIntegrationHandler(deps: VaultDeps) {
  return async ({ environment_id, unique_key }: RequestOf<typeof vaultContracts.deleteIntegration>) => {
    const environment = environmentId(environment_id);
    const doc = await findIntegration(deps, environment, unique_key);
    for (const connection of await deps.connections.listForIntegration(environment, doc._id)) {
      await announcePreDeletion(deps, connection);
      await deps.connections.remove(environment, connection._id);
      await deps.bus.publish(vaultContracts.connectionDeleted, connectionEvent(connection));
    }
    await deps.integrations.remove(environment, doc._id);
    return { success: true as const };
  };
}
