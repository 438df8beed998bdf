import { randomBytes, randomUUID } from 'node:crypto';
import { NOT_TYPED_IN, type ConnectSession, type RequestOf, type vaultContracts } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import type { HttpClient } from '@latchkey/net';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { Provider } from '../catalog/provider-schema.js';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import type { ConnectSessionRepo } from '../db/connect-session-repo.js';
import type { StoredCredentials } from '../domain/connection-credentials.js';
import { SESSION_CLIENT_SECRET_PLACE, SESSION_LIFETIME_MS, SESSION_TOKEN_PREFIX, checkSecretHostsNamed, digestOf, reconnectedTags } from '../domain/connect-sessions.js';
import { verifyCredentials } from '../domain/verify-credentials.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';
import { normalizeTags } from '../domain/views.js';
import { clientCredentialsToken } from '../refresh/fresh-credentials.js';
import { forEndUser } from '../refresh/token-endpoint.js';

type Deps = Pick<VaultDeps, 'connections' | 'cipher' | 'providers'> & Pick<VaultServices, 'integrationService'> & { sessions: Pick<ConnectSessionRepo, 'insert'> };

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
    const integrations = new Map<string, { _id: string; provider: string }>();
    for (const key of named) integrations.set(key, await deps.integrationService.find(environment, key));
    // A host the session sets is where the customer's client secret goes in the flow's code
    // exchange: the customer's own client in these defaults, or the integration's.
    for (const [key, entry] of Object.entries(request.integrations_config_defaults ?? {})) {
      const config = entry.connection_config;
      const customerClient = typeof config['oauth_client_id_override'] === 'string' && config['oauth_client_id_override'] !== '' && typeof config['oauth_client_secret_override'] === 'string' && config['oauth_client_secret_override'] !== '';
      if (!customerClient && !request.reads_client_secrets) {
        checkSecretHostsNamed(deps.providers.get(integrations.get(key)!.provider), config, `integrations_config_defaults.${key}.`);
      }
    }
    if (request.reconnect) {
      const connection = await deps.connections.find(environment, request.reconnect.integration_id, request.reconnect.connection_id);
      if (!connection) throw new AppError('unknown_connection', `No connection "${request.reconnect.connection_id}" in "${request.reconnect.integration_id}"`);
      if (!connection.created_via_session) {
        throw new AppError('invalid_body', 'Only connections created through a connect session can be reconnected', {
          errors: [{ code: 'not_session_connection', message: 'created by import, not by a connect session', path: 'connection_id' }],
        });
      }
      // The flow adds these tags to the connection's: refused now, not at the end of the flow.
      reconnectedTags(connection.tags ?? {}, normalizeTags(request.tags), 'session');
    }
    const token = `${SESSION_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const now = new Date();
    const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
    await deps.sessions.insert(environment, {
      _id: `cs_${randomUUID()}`,
      digest: digestOf(token),
      tags: normalizeTags(request.tags),
      allowed_integrations: request.allowed_integrations ?? (request.reconnect ? [request.reconnect.integration_id] : null),
      ...(await sealClientSecrets(deps, environment, request.integrations_config_defaults ?? {}, integrations)),
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

/**
 * The session's defaults as stored: a customer's OAuth client secret for a flow is taken out of
 * them and sealed under the environment's data key, as every client secret at rest is; the flow
 * opens it (`oauth-flow.ts`). An empty one stays: it is the spec's marker, not a secret.
 */
async function sealClientSecrets(
  deps: Pick<Deps, 'cipher'>,
  environment: EnvironmentId,
  defaults: ConnectSessionDoc['integrations_config_defaults'],
  integrations: ReadonlyMap<string, { _id: string }>,
): Promise<Pick<ConnectSessionDoc, 'integrations_config_defaults' | 'client_secrets'>> {
  const stored: ConnectSessionDoc['integrations_config_defaults'] = {};
  const secrets: Record<string, string> = {};
  for (const [key, entry] of Object.entries(defaults)) {
    const { oauth_client_secret_override: secret, ...config } = entry.connection_config;
    if (typeof secret !== 'string' || secret === '') {
      stored[key] = entry;
      continue;
    }
    secrets[key] = await deps.cipher.encrypt(environment, { integrationId: integrations.get(key)!._id, ...SESSION_CLIENT_SECRET_PLACE }, secret);
    stored[key] = { ...entry, connection_config: config };
  }
  return { integrations_config_defaults: stored, client_secrets: secrets };
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

/** `vault.sessions.get`: the live session behind a token. */
export function getConnectSessionHandler(deps: Pick<VaultServices, 'sessionService'>) {
  return async ({ token }: RequestOf<typeof vaultContracts.getConnectSession>) => sessionView(await deps.sessionService.live({ token }));
}

/** `vault.sessions.delete`: ends a session early. */
export function deleteConnectSessionHandler(deps: { sessions: Pick<ConnectSessionRepo, 'removeByDigest'> }) {
  return async ({ token }: RequestOf<typeof vaultContracts.deleteConnectSession>) => {
    if (!(await deps.sessions.removeByDigest(digestOf(token)))) {
      throw new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
    }
    return { success: true as const };
  };
}

type FormDeps = Pick<VaultDeps, 'bus' | 'providers' | 'logger'> &
  Pick<VaultServices, 'integrationService' | 'sessionService'> & { catalog: { get(name: string): Provider | undefined } };

/**
 * `vault.sessions.connect`: form credentials (API key, basic, other types) from a connect flow,
 * tried first against the provider's verification request when its entry has one.
 */
export function connectWithSessionHandler(deps: FormDeps) {
  return async (request: RequestOf<typeof vaultContracts.connectWithSession>) => {
    const session = await deps.sessionService.live({ token: request.token });
    const credentials = request.credentials;
    if (NOT_TYPED_IN.has(credentials.type)) {
      throw new AppError('invalid_body', `${credentials.type} credentials are not typed in by an end user`, {
        errors: [{ code: 'invalid_value', message: 'a form-based credential type', path: 'credentials.type' }],
      });
    }
    const integration = await deps.sessionService.allowedIntegration(session, request.integration);
    const entry = deps.catalog.get(integration.provider);
    if (entry?.verification && entry.auth_mode === credentials.type) {
      const connectionConfig = await deps.sessionService.flowConnectionConfig(session, integration, entry, request.connection_config);
      await verifyCredentials(deps, { name: integration.provider, entry }, await deps.integrationService.clientCredentials(integration), connectionConfig, credentials);
    }
    return deps.sessionService.saveConnection(session, request.integration, credentials, request.connection_config);
  };
}

/**
 * `vault.sessions.client_credentials`: an OAUTH2_CC connection from a connect flow. The end
 * user's client buys a token at the provider's token endpoint first; a refusal is 400
 * `connection_test_failed` with the provider's error code only, and nothing is stored. An
 * endpoint that gave no answer, or is at an address the policy refuses, is the same code with
 * one payload, `{error: 'unreachable'}`, whatever the reason (`forEndUser`).
 */
export function connectClientCredentialsHandler(deps: Pick<FormDeps, 'providers' | 'sessionService' | 'logger'> & { timeoutMs: number; http: HttpClient }) {
  return async (request: RequestOf<typeof vaultContracts.connectClientCredentials>) => {
    const session = await deps.sessionService.live({ token: request.token });
    const integration = await deps.sessionService.allowedIntegration(session, request.integration);
    const provider = deps.providers.get(integration.provider);
    if (provider?.auth_mode !== 'OAUTH2_CC') {
      throw new AppError('invalid_uri_params', `Integration "${integration.unique_key}" does not use OAuth 2 client credentials`);
    }
    const connectionConfig = await deps.sessionService.flowConnectionConfig(session, integration, provider, request.connection_config);
    let credentials: StoredCredentials;
    try {
      credentials = await clientCredentialsToken(
        {
          provider,
          connectionConfig,
          now: new Date(),
          timeoutMs: deps.timeoutMs,
          http: deps.http,
        },
        { client_id: request.client_id, client_secret: request.client_secret },
      );
    } catch (error) {
      const appError = toAppError(forEndUser(error, deps.logger));
      if (appError.code !== 'refresh_token_external_error') throw appError;
      const payload = appError.payload ?? {};
      // An endpoint that gave no answer, refused address included: `forEndUser`'s one payload, and one message.
      if (payload['error'] === 'unreachable' && typeof payload['status'] !== 'number') {
        throw new AppError('connection_test_failed', "The provider's token endpoint could not be reached; try again later", { payload });
      }
      const reason = typeof payload['error'] === 'string' ? payload['error'] : 'refused';
      const description = typeof payload['error_description'] === 'string' ? ` (${payload['error_description']})` : '';
      throw new AppError('connection_test_failed', `The provider refused these client credentials: ${reason}${description}`, { payload });
    }
    return deps.sessionService.saveConnection(session, integration.unique_key, credentials, request.connection_config);
  };
}
