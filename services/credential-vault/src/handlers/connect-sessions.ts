import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { vaultContracts, webhookContracts, type ConnectSession, type RequestOf } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import type { HttpClient } from '@latchkey/net';
import { environmentId } from '@latchkey/mongo';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import type { ConnectSessionRepo } from '../db/connect-session-repo.js';
import { credentialsVersionOf } from '../db/connection-repo.js';
import type { ProviderEntry, VaultDeps } from '../domain/vault-deps.js';
import { connectionEvent, expiryOf, normalizeTags } from '../domain/views.js';
import { CREDENTIALS_PLACE, insertConnection } from './connections.js';
import type { Provider } from '../catalog/provider-schema.js';
import { checkHostValue, hostBearingKeys } from '../catalog/provider-url.js';
import { requestFreshCredentials } from '../refresh/token-requests.js';
import { findIntegration, integrationCredentials } from './integrations.js';
import { verifyCredentials } from './verify-credentials.js';

/** Session tokens start with this, and live 30 minutes. */
export const SESSION_TOKEN_PREFIX = 'lk_cs_';
export const SESSION_LIFETIME_MS = 30 * 60 * 1000;

export const digestOf = (token: string) => createHash('sha256').update(token).digest('base64url');

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

/** The live session behind a token or a digest, or `unknown_connect_session_token`. */
export async function liveSession(deps: Pick<Deps, 'sessions'>, by: { token: string } | { digest: string }): Promise<ConnectSessionDoc> {
  const unknown = new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
  if ('token' in by && !by.token.startsWith(SESSION_TOKEN_PREFIX)) throw unknown;
  const digest = 'token' in by ? digestOf(by.token) : by.digest;
  const doc = await deps.sessions.findByDigest(digest);
  if (!doc) throw unknown;
  if (doc.expires_at.getTime() <= Date.now()) {
    await deps.sessions.removeByDigest(digest);
    throw unknown;
  }
  return doc;
}

/** `vault.sessions.get`: the live session behind a token. */
export function getConnectSessionHandler(deps: Pick<Deps, 'sessions'>) {
  return async ({ token }: RequestOf<typeof vaultContracts.getConnectSession>) => sessionView(await liveSession(deps, { token }));
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

/** A reconnect that loses the credentials compare-and-set this often in a row gives up. */
const RECONNECT_ATTEMPTS = 5;

/**
 * Saves credentials an end user gave in a connect flow, for an integration the session allows.
 * New connections get a server-chosen id and the session's tags and end user; a reconnect
 * session replaces the credentials of its one connection and nothing else.
 */
export async function saveSessionConnection(
  deps: SaveDeps,
  session: ConnectSessionDoc,
  integrationKey: string,
  credentials: Record<string, unknown>,
  connectionConfig: Record<string, unknown> = {},
): Promise<{ connectionId: string; providerConfigKey: string; operation: 'creation' | 'override' }> {
  const environment = environmentId(session.environment_id);
  const integration = await allowedIntegration(deps, session, integrationKey);
  const expected = deps.providers.get(integration.provider)?.auth_mode;
  if (expected && expected !== credentials['type']) {
    throw new AppError('invalid_body', `Integration "${integration.unique_key}" takes ${expected} credentials`, {
      errors: [{ code: 'invalid_value', message: `expected ${expected}`, path: 'credentials.type' }],
    });
  }
  const now = new Date();
  if (session.reconnect) {
    // The end user's new credentials replace whatever is stored, a refresh that lands meanwhile
    // included: the compare-and-set on the credentials version is retried on a fresh read.
    for (let attempt = 1; ; attempt++) {
      const existing = await deps.connections.find(environment, session.reconnect.integration_id, session.reconnect.connection_id);
      if (!existing || existing.provider_config_key !== integration.unique_key) {
        throw new AppError('unknown_connection', 'The connection this session reconnects is gone');
      }
      const tags = { ...existing.tags, ...session.tags };
      const replaced = await deps.connections.replaceCredentials(environment, existing._id, credentialsVersionOf(existing), {
        credentials: await deps.cipher.encryptJson(environment, CREDENTIALS_PLACE(existing), credentials),
        credentials_type: String(credentials['type']),
        expires_at: expiryOf(credentials),
        errors: existing.errors.filter((error) => error.type !== 'auth'),
        refresh_failure: null,
        tags,
        updated_at: now,
      });
      if (!replaced) {
        if (attempt >= RECONNECT_ATTEMPTS) throw new AppError('service_unavailable', 'The connection kept changing while it was reconnected; try again');
        continue;
      }
      await deps.bus.publish(vaultContracts.connectionCreated, { ...connectionEvent(existing), operation: 'override', tags, end_user: session.end_user });
      return { connectionId: existing.connection_id, providerConfigKey: existing.provider_config_key, operation: 'override' };
    }
  }
  const doc = await insertConnection(deps, environment, integration, credentials, {
    connection_id: randomUUID(),
    metadata: {},
    connection_config: sessionConnectionConfig(session, integration.unique_key, deps.providers.get(integration.provider), connectionConfig),
    tags: session.tags,
    end_user: session.end_user,
    created_via_session: true,
  });
  await deps.bus.publish(vaultContracts.connectionCreated, { ...connectionEvent(doc), operation: 'creation', tags: doc.tags, end_user: doc.end_user });
  await deps.bus.publish(webhookContracts.postCreation, { ...connectionEvent(doc), tags: doc.tags, end_user: doc.end_user });
  return { connectionId: doc.connection_id, providerConfigKey: doc.provider_config_key, operation: 'creation' };
}

/** The integration, if the session allows it. */
export async function allowedIntegration(deps: Pick<Deps, 'integrations'>, session: ConnectSessionDoc, integrationKey: string) {
  if (session.allowed_integrations && !session.allowed_integrations.includes(integrationKey)) {
    throw new AppError('forbidden', `This connect session does not allow the integration "${integrationKey}"`);
  }
  return findIntegration(deps, environmentId(session.environment_id), integrationKey);
}

type SaveDeps = Deps & Pick<VaultDeps, 'bus' | 'cipher' | 'providers'>;

type FormDeps = SaveDeps & { catalog: { get(name: string): Provider | undefined } };

/** Markers in the session's defaults that offer the end user their own OAuth client; not config. */
const CLIENT_OVERRIDE_MARKERS = new Set(['oauth_client_id_override', 'oauth_client_secret_override']);

type ConfigRules = Pick<ProviderEntry, 'connection_configuration' | 'connection_config' | 'authorization_url' | 'token_url' | 'request_url'>;

function notAllowed(key: string, code: string, why: string): AppError {
  return new AppError('invalid_body', `connection_config.${key} ${why}`, { errors: [{ code, message: why, path: `connection_config.${key}` }] });
}

/**
 * The connection config of a connect flow: the customer's values from the session's
 * `integrations_config_defaults` (minus the client-override markers), then what the end user
 * filled in. This is the one gate for end-user config, and it is strict, because these values
 * build the URLs the vault sends client secrets, codes and PKCE verifiers to:
 * - the end user may fill only fields the provider's catalog entry declares;
 * - a field the customer set (to anything but an empty string) is theirs: a different value
 *   from the end user is refused, never merged over it;
 * - a value must match the field's catalog pattern, and every value that lands in the host of
 *   the provider's authorization, token or request URL must pass the host rules
 *   (catalog/provider-url.ts), whoever set it.
 */
export function sessionConnectionConfig(
  session: ConnectSessionDoc,
  integrationKey: string,
  provider: ConfigRules | undefined,
  given: Record<string, unknown> = {},
): Record<string, unknown> {
  const defaults = Object.fromEntries(
    Object.entries((session.integrations_config_defaults[integrationKey]?.connection_config ?? {}) as Record<string, unknown>).filter(([key]) => !CLIENT_OVERRIDE_MARKERS.has(key)),
  );
  const declared = new Set([...(provider?.connection_configuration ?? []), ...Object.keys(provider?.connection_config ?? {})]);
  for (const [key, value] of Object.entries(given)) {
    const preset = defaults[key];
    const customerSet = preset !== undefined && preset !== null && preset !== '';
    // The customer's own value coming back (a flow's saved config, a page echoing it) is theirs.
    if (customerSet && value === preset) continue;
    if (customerSet) throw notAllowed(key, 'not_allowed', 'was set by the customer for this connect session and cannot be changed');
    if (!declared.has(key)) throw notAllowed(key, 'not_allowed', 'is not a connection config field of this provider');
    const pattern = provider?.connection_config?.[key]?.pattern;
    if (pattern !== undefined && value !== '' && !new RegExp(`^(?:${pattern})$`).test(String(value))) {
      throw notAllowed(key, 'invalid_value', "does not match the provider's pattern");
    }
  }
  const config = { ...defaults, ...given };
  for (const template of [provider?.authorization_url, provider?.token_url, provider?.request_url]) {
    if (template === undefined) continue;
    for (const key of hostBearingKeys(template)) {
      if (config[key] !== undefined) checkHostValue(key, config[key], provider?.connection_config);
    }
  }
  return config;
}

/**
 * `vault.sessions.connect`: form credentials (API key, basic, other types) from a connect flow,
 * tried first against the provider's verification request when its entry has one.
 */
export function connectWithSessionHandler(deps: FormDeps) {
  return async (request: RequestOf<typeof vaultContracts.connectWithSession>) => {
    const session = await liveSession(deps, { token: request.token });
    const credentials = request.credentials as Record<string, unknown>;
    const integration = await allowedIntegration(deps, session, request.integration);
    const entry = deps.catalog.get(integration.provider);
    if (entry?.verification && entry.auth_mode === credentials['type']) {
      const connectionConfig = sessionConnectionConfig(session, integration.unique_key, entry, request.connection_config);
      await verifyCredentials(deps, { name: integration.provider, entry }, await integrationCredentials(deps, integration), connectionConfig, credentials);
    }
    return saveSessionConnection(deps, session, request.integration, credentials, request.connection_config);
  };
}

/**
 * `vault.sessions.client_credentials`: an OAUTH2_CC connection from a connect flow. The end
 * user's client buys a token at the provider's token endpoint first; a refusal is 400
 * `connection_test_failed` with the provider's error code only, and nothing is stored.
 */
export function connectClientCredentialsHandler(deps: FormDeps & { timeoutMs: number; http: HttpClient }) {
  return async (request: RequestOf<typeof vaultContracts.connectClientCredentials>) => {
    const session = await liveSession(deps, { token: request.token });
    const integration = await allowedIntegration(deps, session, request.integration);
    const provider = deps.providers.get(integration.provider);
    if (provider?.auth_mode !== 'OAUTH2_CC') {
      throw new AppError('invalid_uri_params', `Integration "${integration.unique_key}" does not use OAuth 2 client credentials`);
    }
    let credentials: Record<string, unknown>;
    try {
      credentials = await requestFreshCredentials('OAUTH2_CC', {
        provider,
        client: {},
        connectionConfig: sessionConnectionConfig(session, integration.unique_key, provider, request.connection_config),
        credentials: { client_id: request.client_id, client_secret: request.client_secret },
        now: new Date(),
        timeoutMs: deps.timeoutMs,
        http: deps.http,
      });
    } catch (error) {
      const appError = toAppError(error);
      if (appError.code !== 'refresh_token_external_error') throw appError;
      const payload = appError.payload ?? {};
      const reason = typeof payload['error'] === 'string' ? payload['error'] : 'refused';
      const description = typeof payload['error_description'] === 'string' ? ` (${payload['error_description']})` : '';
      throw new AppError(
        'connection_test_failed',
        reason === 'unreachable' ? "The provider's token endpoint could not be reached; try again later" : `The provider refused these client credentials: ${reason}${description}`,
        { payload },
      );
    }
    return saveSessionConnection(deps, session, integration.unique_key, credentials, request.connection_config);
  };
}
