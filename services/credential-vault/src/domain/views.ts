import type { Connection } from '@latchkey/contracts';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { StoredCredentials } from './connection-credentials.js';

/** The list form of an integration: exactly the fields the API document lists for it. */
export function integrationListItem(doc: IntegrationDoc, logo: string) {
  return {
    unique_key: doc.unique_key,
    provider: doc.provider,
    logo,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** The connection's errors: its auth error, and each sync (and variant) whose latest run failed. */
export function connectionErrors(doc: ConnectionDoc): ConnectionDoc['errors'] {
  const failedSyncs = Object.values(doc.sync_runs ?? {}).flatMap((run) => (run.failed_run ? [{ type: 'sync' as const, log_id: run.failed_run }] : []));
  return [...(doc.errors ?? []), ...failedSyncs];
}

/** A connection list item: never credentials. */
export function connectionListItem(doc: ConnectionDoc) {
  return {
    id: doc.id,
    connection_id: doc.connection_id,
    provider: doc.provider,
    provider_config_key: doc.provider_config_key,
    created: doc.created_at.toISOString(),
    metadata: doc.metadata ?? null,
    tags: doc.tags ?? {},
    errors: connectionErrors(doc),
  };
}

/**
 * The full form. `credentials` is left out unless given: the caller decides from the key's
 * scope. The refresh token is dropped unless asked for.
 */
export function connectionView(doc: ConnectionDoc, credentials?: StoredCredentials, includeRefreshToken = false): Connection {
  const view: Connection = {
    id: doc.id,
    connection_id: doc.connection_id,
    provider_config_key: doc.provider_config_key,
    provider: doc.provider,
    errors: connectionErrors(doc),
    end_user: (doc.end_user as Connection['end_user']) ?? null,
    metadata: doc.metadata ?? {},
    connection_config: doc.connection_config ?? {},
    tags: doc.tags ?? {},
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
    last_fetched_at: doc.last_fetched_at ? doc.last_fetched_at.toISOString() : null,
  };
  if (credentials) {
    // An unauthenticated connection's credentials are the API document's empty object.
    if (credentials.type === 'NONE') return { ...view, credentials: {} };
    if (includeRefreshToken) {
      view.credentials = credentials;
    } else {
      const { refresh_token: _refreshToken, ...rest } = credentials;
      view.credentials = { ...rest, ...withoutRefreshToken(rest['raw']) };
    }
  }
  return view;
}

/**
 * `raw` (the provider's token answer as it came) without the refresh token it names, which is
 * shown only when asked for (`refresh_token=true`); nothing when there is none to take out.
 */
function withoutRefreshToken(raw: unknown): { raw?: Record<string, unknown> } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || !('refresh_token' in raw)) return {};
  const { refresh_token: _refreshToken, ...rest } = raw as Record<string, unknown>;
  return { raw: rest };
}

/** Tag keys are normalised to lower case. */
export function normalizeTags(tags: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(tags ?? {}).map(([key, value]) => [key.toLowerCase(), value]));
}

/** The date a credentials object expires, from its `expires_at`, if any. */
export function expiryOf(credentials: StoredCredentials): Date | null {
  const value = credentials['expires_at'];
  if (typeof value !== 'string') return null;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? null : at;
}

/** The payload of `connection.*` events: identifies, never carries credentials. */
export function connectionEvent(doc: ConnectionDoc) {
  return {
    environment_id: doc.environment_id,
    id: doc.id,
    connection_id: doc.connection_id,
    provider_config_key: doc.provider_config_key,
    provider: doc.provider,
  };
}
