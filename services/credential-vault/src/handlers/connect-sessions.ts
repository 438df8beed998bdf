import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { ConnectSession, RequestOf, vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import type { ConnectSessionRepo } from '../db/connect-session-repo.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { normalizeTags } from '../domain/views.js';
import { findIntegration } from './integrations.js';

/** Session tokens start with this, and live 30 minutes. */
export const SESSION_TOKEN_PREFIX = 'lk_cs_';
export const SESSION_LIFETIME_MS = 30 * 60 * 1000;

const digestOf = (token: string) => createHash('sha256').update(token).digest('base64url');

type Deps = Pick<VaultDeps, 'integrations' | 'connections'> & { sessions: ConnectSessionRepo };

/**
 * `vault.sessions.create`: a session for one end user's connect flow. Every named integration
 * must exist; a reconnect session names a connection that was made through a session, and the
 * flow may then replace its credentials only.
 */
export function createConnectSessionHandler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.createConnectSession>) => {
    const environment = environmentId(request.environment_id);
    const named = new Set([
      ...(request.allowed_integrations ?? []),
      ...Object.keys(request.integrations_config_defaults ?? {}),
      ...Object.keys(request.overrides ?? {}),
      ...(request.reconnect ? [request.reconnect.integration_id] : []),
    ]);
    for (const key of named) await findIntegration(deps, environment, key);
    if (request.reconnect) {
      const connection = await deps.connections.find(environment, request.reconnect.integration_id, request.reconnect.connection_id);
      if (!connection) throw new AppError('unknown_connection', `No connection "${request.reconnect.connection_id}" in "${request.reconnect.integration_id}"`);
      if (!connection.created_via_session) {
        throw new AppError('invalid_body', 'Only connections created through a connect session can be reconnected', {
          errors: [{ code: 'not_session_connection', message: 'created by import, not by a connect session', path: 'connection_id' }],
        });
      }
    }
    const token = `${SESSION_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const now = new Date();
    const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
    await deps.sessions.insert(environment, {
      _id: `cs_${randomUUID()}`,
      digest: digestOf(token),
      tags: normalizeTags(request.tags),
      allowed_integrations: request.allowed_integrations ?? (request.reconnect ? [request.reconnect.integration_id] : null),
      integrations_config_defaults: request.integrations_config_defaults ?? {},
      overrides: request.overrides ?? {},
      end_user: request.end_user ?? null,
      organization: request.organization ?? null,
      reconnect: request.reconnect ?? null,
      created_at: now,
      expires_at: expiresAt,
    });
    return { token, expires_at: expiresAt.toISOString() };
  };
}

function sessionView(doc: ConnectSessionDoc): ConnectSession {
  return {
    environment_id: doc.environment_id,
    tags: doc.tags ?? {},
    allowed_integrations: doc.allowed_integrations ?? null,
    integrations_config_defaults: doc.integrations_config_defaults ?? {},
    overrides: doc.overrides ?? {},
    end_user: doc.end_user ?? null,
    organization: doc.organization ?? null,
    reconnect: doc.reconnect ?? null,
    created_at: doc.created_at.toISOString(),
    expires_at: doc.expires_at.toISOString(),
  };
}

/** `vault.sessions.get`: the live session behind a token, or `unknown_connect_session_token`. */
export function getConnectSessionHandler(deps: Pick<Deps, 'sessions'>) {
  return async ({ token }: RequestOf<typeof vaultContracts.getConnectSession>) => {
    const unknown = new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
    if (!token.startsWith(SESSION_TOKEN_PREFIX)) throw unknown;
    const digest = digestOf(token);
    const doc = await deps.sessions.findByDigest(digest);
    if (!doc) throw unknown;
    if (doc.expires_at.getTime() <= Date.now()) {
      await deps.sessions.removeByDigest(digest);
      throw unknown;
    }
    return sessionView(doc);
  };
}

/** `vault.sessions.delete`: ends a session early. */
export function deleteConnectSessionHandler(deps: Pick<Deps, 'sessions'>) {
  return async ({ token }: RequestOf<typeof vaultContracts.deleteConnectSession>) => {
    if (!(await deps.sessions.removeByDigest(digestOf(token)))) {
      throw new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
    }
    return { success: true as const };
  };
}
