import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import type { EnvironmentDoc } from '../../db/environment-model.js';
import type { GatewayDeps } from '../../http/deps.js';

export const environmentName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'lowercase letters, digits, - and _; up to 63');

export const environmentParams = z.strictObject({ name: environmentName });

/** The page of a newest-first operator log: at most `limit` entries, older than `before` (a time from the last page). */
export const logPageQuery = {
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  before: z.iso.datetime({ offset: true }).optional(),
};

export async function findEnvironmentByName(deps: Pick<GatewayDeps, 'environments'>, name: string): Promise<EnvironmentDoc> {
  const environment = await deps.environments.findByName(name);
  if (!environment) throw new AppError('unknown_environment', `No environment named "${name}"`);
  return environment;
}
