import { kvLockKey, oneAtATime, WRITE_KEYS, type Holding, type KvLocks } from '@latchkey/bus';
import type { RequestOf, ResponseOf, vaultContracts } from '@latchkey/contracts';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { Keyring } from '../crypto/keyring.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { CREDENTIALS_PLACE } from '../domain/connection-credentials.js';
import { INTEGRATION_PLACES } from '../domain/integrations.js';

type Deps = Pick<VaultDeps, 'connections' | 'integrations' | 'logger'> & {
  keyring: Keyring;
  /** The vault's write keys (`vault_write_locks`): one of them is the rotation's. */
  locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'>;
};

/** The one key every rotation holds, on every replica, renewed while it runs. */
const ROTATION_KEY = kvLockKey('rotation', 'keys');

/**
 * `vault.keys.rotate`. Step one re-wraps data keys (after it, an old KEK can leave
 * ENCRYPTION_KEYS). Step two, with `data_keys`, starts a new data key in every environment and
 * re-encrypts each stored secret under it, one compare-and-set per document, so writes made
 * meanwhile (a refresh) are never overwritten with older values.
 */
export function rotateKeysHandler(deps: Deps) {
  // One rotation at a time, across replicas: an operator retrying after the gateway timed out
  // while the first run goes on elsewhere. On FerretDB a data key's re-wrap and its retirement by
  // the other run (or the other run's re-wrap, to another sealing version) are each a read and
  // a rewrite, and one can undo the other after it was counted. The second run is refused at
  // once rather than queued: the first is doing its work, and running it again after is cheap.
  // A run that lost its key (stalled past its TTL) stops at its next step, and is answered
  // service_unavailable even if it finished: another run may have started meanwhile.
  const busy = 'Another key rotation is still running; try again once it has finished';
  return ({ data_keys }: RequestOf<typeof vaultContracts.rotateKeys>): Promise<ResponseOf<typeof vaultContracts.rotateKeys>> =>
    oneAtATime(
      deps.locks,
      ROTATION_KEY,
      async (holding) => {
        const report = await deps.keyring.rotate();
        let reencrypted = 0;
        if (data_keys) {
          const environments = new Set([...(await deps.connections.environments()), ...(await deps.integrations.environments())]);
          for (const id of environments) reencrypted += await reencryptEnvironment(deps, holding, environmentId(id));
        }
        deps.logger.info('keys rotated', { rewrapped: report.rewrapped, failed: report.failed.length, reencrypted });
        return { ...report, reencrypted };
      },
      { waitMs: 0, busy, ...WRITE_KEYS },
    );
}

async function reencryptEnvironment(deps: Deps, holding: Holding, environment: EnvironmentId): Promise<number> {
  holding.assertHeld();
  await deps.keyring.rotateDataKey(environment);
  let count = 0;
  for (const integration of await deps.integrations.list(environment)) {
    for (const field of ['credentials', 'webhook_secret'] as const) {
      const blob = integration[field];
      if (!blob) continue;
      const next = await deps.keyring.reencrypt(environment, { integrationId: integration._id, ...INTEGRATION_PLACES[field] }, blob);
      holding.assertHeld();
      if (next !== blob && (await deps.integrations.swapField(environment, integration._id, field, blob, next))) count++;
    }
  }
  for (const connection of await deps.connections.listAll(environment)) {
    const next = await deps.keyring.reencrypt(environment, CREDENTIALS_PLACE(connection), connection.credentials);
    holding.assertHeld();
    if (next !== connection.credentials && (await deps.connections.swapCredentials(environment, connection._id, connection.credentials, next))) count++;
  }
  return count;
}
