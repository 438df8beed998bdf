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

/**
 * With `accept_unsigned_webhooks`, anyone may send the integration's webhooks, which are
 * forwarded signed by Latchkey as genuine: as the webhook secret does, turning it on takes the
 * scope that reads the integration's credentials.
 */
export function checkUnsignedWebhooks(key: Pick<ResolvedKey, 'scopes'>, acceptUnsigned: boolean | undefined): void {
  if (acceptUnsigned !== true || key.scopes.has('environment:integrations:read_credentials')) return;
  throw new AppError('forbidden', 'Turning accept_unsigned_webhooks on needs the scope environment:integrations:read_credentials: it lets anyone forge the webhooks Latchkey forwards as genuine', {
    payload: { scope: 'environment:integrations:read_credentials' },
  });
}
