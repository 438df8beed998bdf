import { callerOf, type BusMessage } from '@latchkey/bus';
import { gatewayContracts, type EnvironmentInfo, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { EnvironmentRepo } from '../db/environment-repo.js';
import { environmentView } from '../domain/environment-view.js';
import { SIGNING_KEY_GRACE_MS } from '../domain/signing-keys.js';

/**
 * `gateway.environment.get`: an environment's settings for other services, no secrets; its
 * variables for the action-runner only (functions read them), known by the subject it asked on.
 */
export function getEnvironmentHandler(deps: { environments: Pick<EnvironmentRepo, 'findById' | 'findByPublicId'> }) {
  return async (request: RequestOf<typeof gatewayContracts.getEnvironment>, msg: Pick<BusMessage, 'subject'>): Promise<EnvironmentInfo> => {
    const environment =
      'environment_id' in request
        ? await deps.environments.findById(request.environment_id)
        : await deps.environments.findByPublicId(request.public_id);
    if (!environment) throw new AppError('unknown_environment', 'No such environment');
    const { created_at: _created, updated_at: _updated, ...info } = environmentView(environment);
    return callerOf(gatewayContracts.getEnvironment, msg) === 'action-runner' ? info : { ...info, variables: [] };
  };
}

/**
 * `gateway.environment.signing_keys`: the secrets that sign the environment's webhooks, newest
 * first: the active key, and keys retired less than 24 hours ago (both signatures are sent).
 */
export function getSigningKeysHandler(deps: { environments: Pick<EnvironmentRepo, 'findById'> }, now: () => number = Date.now) {
  return async ({ environment_id }: RequestOf<typeof gatewayContracts.getSigningKeys>) => {
    const environment = await deps.environments.findById(environment_id);
    if (!environment) throw new AppError('unknown_environment', 'No such environment');
    const keys = environment.signing_keys
      .filter((key) => !key.retired_at || now() - new Date(key.retired_at).getTime() < SIGNING_KEY_GRACE_MS)
      .sort((a, b) => new Date(b.created_at).getTime() - new Date(a.created_at).getTime())
      .map((key) => key.secret);
    if (keys.length === 0) throw new AppError('internal_error', 'The environment has no signing key');
    return { keys };
  };
}
