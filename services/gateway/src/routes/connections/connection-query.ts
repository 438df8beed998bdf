import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import type { ResolvedKey } from '../../domain/key-cache.js';
import { queryBoolean } from '../query.js';

export const connectionParams = z.strictObject({ connectionId: z.string().min(1).max(255) });

export const providerConfigKeyQuery = z.strictObject({ provider_config_key: z.string().min(1).max(128) });

export const getConnectionQuery = z.strictObject({
  provider_config_key: z.string().min(1).max(128),
  force_refresh: queryBoolean,
  refresh_token: queryBoolean,
  refresh_vendor_app_jwt_token: queryBoolean,
});

/**
 * Reading a connection: credentials only with `connections:read_credentials`; asking to refresh
 * or to see the refresh token with the plain read scope is a 403, not a silent no-op.
 */
export function connectionReadRequest(key: ResolvedKey, connectionId: string, query: z.output<typeof getConnectionQuery>) {
  const withCredentials = key.scopes.has('environment:connections:read_credentials');
  const asked = (['force_refresh', 'refresh_token', 'refresh_vendor_app_jwt_token'] as const).filter((flag) => query[flag]);
  if (asked.length > 0 && !withCredentials) {
    throw new AppError('forbidden', `${asked.join(', ')} needs the scope environment:connections:read_credentials`, {
      payload: { scope: 'environment:connections:read_credentials' },
    });
  }
  return {
    environment_id: key.environmentId,
    reader: { key_id: key.keyId },
    connection_id: connectionId,
    provider_config_key: query.provider_config_key,
    include_credentials: withCredentials,
    include_refresh_token: query.refresh_token,
    force_refresh: query.force_refresh,
    refresh_vendor_app_jwt_token: query.refresh_vendor_app_jwt_token,
  };
}
