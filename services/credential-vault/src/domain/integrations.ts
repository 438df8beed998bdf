import { randomBytes } from 'node:crypto';
import { AppError } from '@latchkey/errors';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import { z } from 'zod';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { IntegrationRepo } from '../db/integration-repo.js';
import type { CredentialCipher } from './vault-deps.js';

/** The field names that bind each encrypted integration value to its place. */
export const INTEGRATION_PLACES = {
  credentials: { field: 'integration.credentials' },
  webhook_secret: { field: 'integration.webhook_secret' },
} as const;
const CREDENTIALS = INTEGRATION_PLACES.credentials;
const WEBHOOK_SECRET = INTEGRATION_PLACES.webhook_secret;
const stringMap = z.record(z.string(), z.string());

/** Allowed hosts as the proxy compares them: lower-case, each once. */
export const normalHosts = (hosts: readonly string[]) => [...new Set(hosts.map((host) => host.toLowerCase()))];

export interface IntegrationServiceDeps {
  integrations: Pick<IntegrationRepo, 'findByKey' | 'findById' | 'environments' | 'withoutWebhookSecret' | 'setWebhookSecretIfMissing' | 'holdingMembers'>;
  cipher: Pick<CredentialCipher, 'encrypt' | 'decrypt' | 'encryptJson' | 'decryptJson'>;
}

/**
 * The rules every part of the vault shares about integrations: finding one by its key, and its
 * sealed values (client credentials, webhook secret), each bound to its integration.
 */
export function createIntegrationService(deps: IntegrationServiceDeps) {
  /** A new webhook secret, sealed for its integration. */
  const newWebhookSecret = (environment: EnvironmentId, integrationId: string): Promise<string> =>
    deps.cipher.encrypt(environment, { integrationId, ...WEBHOOK_SECRET }, randomBytes(32).toString('hex'));

  return {
    /** The integration, or `unknown_provider_config`. */
    async find(environment: EnvironmentId, uniqueKey: string): Promise<IntegrationDoc> {
      const integration = await deps.integrations.findByKey(environment, uniqueKey);
      if (!integration) throw new AppError('unknown_provider_config', `No integration with unique_key "${uniqueKey}"`);
      return integration;
    },

    /**
     * Runs `store`, the insert of a connection of `integration`, only while the integration still
     * holds the key it was found by, and under its members key (`holdingMembers`), which its
     * rename and its deletion take too: else `unknown_provider_config`, and nothing stored.
     */
    async storing<T>(environment: EnvironmentId, integration: Pick<IntegrationDoc, '_id' | 'unique_key'>, store: () => Promise<T>): Promise<T> {
      return deps.integrations.holdingMembers(integration._id, async (holding) => {
        const current = await deps.integrations.findById(environment, integration._id);
        if (current?.unique_key !== integration.unique_key) throw new AppError('unknown_provider_config', `No integration with unique_key "${integration.unique_key}"`);
        holding.assertHeld();
        return store();
      });
    },

    /** The integration's client credentials, decrypted (empty when none were given). */
    async clientCredentials(doc: IntegrationDoc): Promise<Record<string, string>> {
      if (!doc.credentials) return {};
      return deps.cipher.decryptJson(environmentId(doc.environment_id), { integrationId: doc._id, ...CREDENTIALS }, doc.credentials, stringMap);
    },

    /** Client credentials sealed for their integration, as stored. */
    sealClientCredentials(environment: EnvironmentId, integrationId: string, credentials: Record<string, string>): Promise<string> {
      return deps.cipher.encryptJson(environment, { integrationId, ...CREDENTIALS }, credentials);
    },

    newWebhookSecret,

    /**
     * The integration's webhook secret, the same for all its connections. Every integration gets
     * one when it is created (older ones once, at start: `backfillWebhookSecrets`); a read never
     * writes, so it never moves `updated_at`.
     */
    async webhookSecret(environment: EnvironmentId, doc: IntegrationDoc): Promise<string> {
      const place = { integrationId: doc._id, ...WEBHOOK_SECRET };
      let sealed = doc.webhook_secret;
      if (!sealed) {
        // Only an integration made by an older vault while this one started can lack it.
        await deps.integrations.setWebhookSecretIfMissing(environment, doc._id, await newWebhookSecret(environment, doc._id));
        sealed = (await deps.integrations.findByKey(environment, doc.unique_key))?.webhook_secret ?? null;
        if (!sealed) throw new AppError('unknown_provider_config', `No integration with unique_key "${doc.unique_key}"`);
      }
      return deps.cipher.decrypt(environment, place, sealed);
    },

    /** Once at start: integrations stored before secrets were made at creation get theirs. */
    async backfillWebhookSecrets(): Promise<number> {
      let filled = 0;
      for (const id of await deps.integrations.environments()) {
        const environment = environmentId(id);
        for (const doc of await deps.integrations.withoutWebhookSecret(environment)) {
          if (await deps.integrations.setWebhookSecretIfMissing(environment, doc._id, await newWebhookSecret(environment, doc._id))) filled++;
        }
      }
      return filled;
    },
  };
}

export type IntegrationService = ReturnType<typeof createIntegrationService>;
