import { z } from 'zod';
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
 * Reading a connection: credentials only with `connections:read_credentials`. The API document
 * lets either read scope refresh (`force_refresh`, the vendor app JWT); a plain read key's answer
 * then carries no credentials as usual, and asking for the refresh token adds nothing to it.
 */
export function connectionReadRequest(key: ResolvedKey, connectionId: string, query: z.output<typeof getConnectionQuery>) {
  const withCredentials = key.scopes.has('environment:connections:read_credentials');
  return {
    environment_id: key.environmentId,
    reader: { key_id: key.keyId },
    connection_id: connectionId,
    provider_config_key: query.provider_config_key,
    include_credentials: withCredentials,
    include_refresh_token: withCredentials && query.refresh_token,
    force_refresh: query.force_refresh,
    refresh_vendor_app_jwt_token: query.refresh_vendor_app_jwt_token,
  };
}
