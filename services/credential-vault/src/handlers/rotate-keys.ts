import type { RequestOf, ResponseOf, vaultContracts } from '@latchkey/contracts';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { Keyring } from '../crypto/keyring.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { CREDENTIALS_PLACE } from '../domain/connection-credentials.js';
import { INTEGRATION_PLACES } from '../domain/integrations.js';

type Deps = Pick<VaultDeps, 'connections' | 'integrations' | 'logger'> & { keyring: Keyring };

/**
 * `vault.keys.rotate`. Step one re-wraps data keys (after it, an old KEK can leave
 * ENCRYPTION_KEYS). Step two, with `data_keys`, starts a new data key in every environment and
 * re-encrypts each stored secret under it, one compare-and-set per document, so writes made
 * meanwhile (a refresh) are never overwritten with older values.
 */
export function rotateKeysHandler(deps: Deps) {
  return async ({ data_keys }: RequestOf<typeof vaultContracts.rotateKeys>): Promise<ResponseOf<typeof vaultContracts.rotateKeys>> => {
    const report = await deps.keyring.rotate();
    let reencrypted = 0;
    if (data_keys) {
      const environments = new Set([...(await deps.connections.environments()), ...(await deps.integrations.environments())]);
      for (const id of environments) reencrypted += await reencryptEnvironment(deps, environmentId(id));
    }
    deps.logger.info('keys rotated', { rewrapped: report.rewrapped, failed: report.failed.length, reencrypted });
    return { ...report, reencrypted };
  };
}

async function reencryptEnvironment(deps: Deps, environment: EnvironmentId): Promise<number> {
  await deps.keyring.rotateDataKey(environment);
  let count = 0;
  for (const integration of await deps.integrations.list(environment)) {
    for (const field of ['credentials', 'webhook_secret'] as const) {
      const blob = integration[field];
      if (!blob) continue;
      const next = await deps.keyring.reencrypt(environment, { integrationId: integration._id, ...INTEGRATION_PLACES[field] }, blob);
      if (next !== blob && (await deps.integrations.swapField(environment, integration._id, field, blob, next))) count++;
    }
  }
  for (const connection of await deps.connections.listAll(environment)) {
    const next = await deps.keyring.reencrypt(environment, CREDENTIALS_PLACE(connection), connection.credentials);
    if (next !== connection.credentials && (await deps.connections.swapCredentials(environment, connection._id, connection.credentials, next))) count++;
  }
  return count;
}
