import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import type { ResolvedKey } from '../../domain/key-cache.js';

/** The integration a route names in its path: `/integrations/{uniqueKey}`. */
export const uniqueKeyParams = z.strictObject({ uniqueKey: z.string().min(1).max(128) });

/**
 * Hosts in `allowed_hosts` receive every connection's credentials with a `Base-Url-Override`:
 * naming them takes the scope that reads those credentials, not only the integration's own.
 */
export function checkHostsWidening(key: Pick<ResolvedKey, 'scopes'>, allowedHosts: readonly string[] | undefined): void {
  if (allowedHosts === undefined || allowedHosts.length === 0 || key.scopes.has('environment:connections:read_credentials')) return;
  throw new AppError('forbidden', 'Naming allowed_hosts needs the scope environment:connections:read_credentials: they receive the connections\' credentials', {
    payload: { scope: 'environment:connections:read_credentials' },
  });
}
