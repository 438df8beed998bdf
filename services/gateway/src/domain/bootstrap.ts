import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { environmentId, isDuplicateKey } from '@latchkey/mongo';
import type { AccountRepo } from '../db/account-repo.js';
import type { ApiKeyRepo } from '../db/api-key-repo.js';
import type { EnvironmentRepo } from '../db/environment-repo.js';
import { newId } from './ids.js';
import { digestApiKey, hintOf } from './api-key-secrets.js';
import { generateSigningKey } from './signing-keys.js';

export const DEFAULT_ACCOUNT = 'default';
export const DEFAULT_KEY_NAME = 'Default - Full access';

export interface BootstrapDeps {
  accounts: Pick<AccountRepo, 'ensure'>;
  environments: Pick<EnvironmentRepo, 'create' | 'findByName' | 'markBootstrapKey'>;
  apiKeys: Pick<ApiKeyRepo, 'findByDigest' | 'insert'>;
  logger: Logger;
}

/**
 * Creates, once and idempotently (replicas may race), the bootstrap environment and, when a
 * secret is given, its full-access key with exactly that secret. Once: the environment keeps the
 * digest of the secret its key was made for, so a key the operator revoked is not made again at
 * the next start while BOOTSTRAP_SECRET_KEY is unchanged (a new secret makes a new key).
 */
export async function bootstrap(
  deps: BootstrapDeps,
  input: { environmentName: string; secretKey: string | undefined; digestSecret: string },
): Promise<void> {
  const account = await deps.accounts.ensure(DEFAULT_ACCOUNT);
  let environment = await deps.environments.findByName(input.environmentName);
  if (!environment) {
    try {
      environment = await deps.environments.create({
        name: input.environmentName,
        account_id: account._id,
        signing_key: generateSigningKey(new Date()),
      });
      deps.logger.info('bootstrap environment created', { environment: input.environmentName });
    } catch (error) {
      if (!(error instanceof AppError && error.code === 'duplicate_environment')) throw error;
      environment = await deps.environments.findByName(input.environmentName);
    }
  }
  if (!environment || input.secretKey === undefined) return;

  const digest = digestApiKey(input.secretKey, input.digestSecret);
  if (environment.bootstrap_key_digest === digest) return;
  // Made before the environment kept its digest, or by a start that stopped before marking it.
  if (await deps.apiKeys.findByDigest(digest)) {
    await deps.environments.markBootstrapKey(environment._id, digest);
    return;
  }
  try {
    await deps.apiKeys.insert(environmentId(environment._id), {
      _id: newId('key'),
      account_id: environment.account_id,
      display_name: DEFAULT_KEY_NAME,
      scopes: 'full_access',
      digest,
      hint: hintOf(input.secretKey),
      created_at: new Date(),
      last_used_at: null,
    });
    deps.logger.info('bootstrap key created', { environment: input.environmentName });
  } catch (error) {
    if (!isDuplicateKey(error)) throw error;
  }
  await deps.environments.markBootstrapKey(environment._id, digest);
}
