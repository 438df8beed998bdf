import type { EnvironmentInfo, RequestOf } from '@latchkey/contracts';
import type { gatewayContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { EnvironmentRepo } from '../db/environment-repo.js';

/** `gateway.environment.get`: an environment's settings for other services, no secrets. */
export function getEnvironmentHandler(deps: { environments: Pick<EnvironmentRepo, 'findById' | 'findByPublicId'> }) {
  return async (request: RequestOf<typeof gatewayContracts.getEnvironment>): Promise<EnvironmentInfo> => {
    const environment =
      'environment_id' in request
        ? await deps.environments.findById(request.environment_id)
        : await deps.environments.findByPublicId(request.public_id);
    if (!environment) throw new AppError('unknown_environment', 'No such environment');
    return {
      id: environment._id,
      public_id: environment.public_id,
      name: environment.name,
      account_id: environment.account_id,
      webhook_url: environment.webhook_url,
      webhook_url_secondary: environment.webhook_url_secondary,
      send_auth_webhooks: environment.send_auth_webhooks,
      callback_url: environment.callback_url,
      variables: environment.variables.map(({ name, value }) => ({ name, value })),
    };
  };
}
