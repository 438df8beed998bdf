import type { EnvironmentInfo, RequestOf } from '@latchkey/contracts';
import type { gatewayContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { EnvironmentRepo } from '../db/environment-repo.js';
import { environmentView } from '../domain/environment-view.js';

/** `gateway.environment.get`: an environment's settings for other services, no secrets. */
export function getEnvironmentHandler(deps: { environments: Pick<EnvironmentRepo, 'findById' | 'findByPublicId'> }) {
  return async (request: RequestOf<typeof gatewayContracts.getEnvironment>): Promise<EnvironmentInfo> => {
    const environment =
      'environment_id' in request
        ? await deps.environments.findById(request.environment_id)
        : await deps.environments.findByPublicId(request.public_id);
    if (!environment) throw new AppError('unknown_environment', 'No such environment');
    const { created_at: _created, updated_at: _updated, ...info } = environmentView(environment);
    return info;
  };
}
