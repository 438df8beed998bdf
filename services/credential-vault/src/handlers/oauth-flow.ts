import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { RequestOf, vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import { interpolate } from '../catalog/interpolate.js';
import type { OAuthSessionRepo } from '../db/oauth-session-model.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { expiryFrom, fillUrl, postToken } from '../refresh/token-requests.js';
import { allowedIntegration, liveSession, saveSessionConnection } from './connect-sessions.js';
import { integrationCredentials } from './integrations.js';
import type { ConnectSessionRepo } from '../db/connect-session-repo.js';

/** An authorization must come back within this long. */
const STATE_LIFETIME_MS = 10 * 60 * 1000;
const VERIFIER_PLACE = { field: 'oauth.code_verifier' };

type Deps = VaultDeps & {
  sessions: ConnectSessionRepo;
  oauthSessions: OAuthSessionRepo;
  catalog: { get(name: string): { authorization_url?: string | undefined; default_scopes?: string[] | undefined; scope_separator: string; authorization_params?: Record<string, string> | undefined; disable_pkce?: boolean | undefined; auth_mode: string } | undefined };
  timeoutMs: number;
};

/**
 * `vault.oauth.start`: the provider's authorization URL for an end user's session, with a
 * single-use `state`, PKCE S256 (unless the provider disables it), the exact redirect URI, the
 * provider's scopes joined its way and its authorization parameters.
 */
export function startOAuthHandler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.startOAuth>) => {
    const session = await liveSession(deps, { token: request.token });
    const integration = await allowedIntegration(deps, session, request.integration);
    const provider = deps.catalog.get(integration.provider);
    if (!provider?.authorization_url || provider.auth_mode !== 'OAUTH2') {
      throw new AppError('invalid_uri_params', `Integration "${integration.unique_key}" does not use OAuth 2`);
    }
    const client = await integrationCredentials(deps, integration);
    if (!client['client_id']) throw new AppError('invalid_body', `Integration "${integration.unique_key}" has no client_id`);
    const connectionConfig = {
      ...(session.integrations_config_defaults[integration.unique_key]?.connection_config as Record<string, string> | undefined),
      ...request.connection_config,
    };
    const state = randomBytes(32).toString('base64url');
    const verifier = provider.disable_pkce ? null : randomBytes(48).toString('base64url');
    const now = new Date();
    await deps.oauthSessions.insert({
      _id: randomUUID(),
      environment_id: session.environment_id,
      state,
      session_digest: session.digest,
      integration: integration.unique_key,
      redirect_uri: request.redirect_uri,
      code_verifier: verifier ? await deps.cipher.encrypt(environmentId(session.environment_id), { integrationId: integration._id, ...VERIFIER_PLACE }, verifier) : null,
      connection_config: connectionConfig,
      created_at: now,
      expires_at: new Date(now.getTime() + STATE_LIFETIME_MS),
    });
    const url = new URL(fillUrl(provider.authorization_url, connectionConfig));
    const params = url.searchParams;
    for (const [name, template] of Object.entries(provider.authorization_params ?? {})) params.set(name, interpolate(template, { connectionConfig }));
    for (const [name, value] of Object.entries(request.authorization_params ?? {})) params.set(name, value);
    params.set('response_type', 'code');
    params.set('client_id', client['client_id']);
    params.set('redirect_uri', request.redirect_uri);
    params.set('state', state);
    if (provider.default_scopes?.length && !params.has('scope')) params.set('scope', provider.default_scopes.join(provider.scope_separator));
    if (verifier) {
      params.set('code_challenge', createHash('sha256').update(verifier).digest('base64url'));
      params.set('code_challenge_method', 'S256');
    }
    return { url: url.toString() };
  };
}

/**
 * `vault.oauth.finish`: the provider sent the end user back. The state must be known, unused,
 * unexpired and its connect session still live; then the code is exchanged (with the PKCE
 * verifier) and the connection saved with the tokens, `expires_at` and the raw answer.
 */
export function finishOAuthHandler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.finishOAuth>) => {
    const refused = new AppError('invalid_query_params', 'This authorization is unknown, expired or already used; start again');
    const flow = await deps.oauthSessions.consume(request.state);
    if (!flow || flow.expires_at.getTime() <= Date.now()) throw refused;
    const session = await liveSession(deps, { digest: flow.session_digest });
    const integration = await allowedIntegration(deps, session, flow.integration);
    const provider = deps.providers.get(integration.provider);
    if (!provider) throw new AppError('unknown_provider', `Provider "${integration.provider}" is not in the catalog`);
    const client = await integrationCredentials(deps, integration);
    const now = new Date();
    const form: Record<string, string> = { grant_type: 'authorization_code', code: request.code, redirect_uri: flow.redirect_uri, ...provider.token_params };
    if (flow.code_verifier) {
      form['code_verifier'] = await deps.cipher.decrypt(environmentId(flow.environment_id), { integrationId: integration._id, ...VERIFIER_PLACE }, flow.code_verifier);
    }
    const raw = await postToken(
      { provider, client, connectionConfig: flow.connection_config, credentials: {}, now, timeoutMs: deps.timeoutMs },
      form,
      client['client_id'],
      client['client_secret'],
    );
    const expiresAt = expiryFrom(raw, now);
    const credentials = {
      type: 'OAUTH2',
      access_token: raw['access_token'],
      ...(typeof raw['refresh_token'] === 'string' ? { refresh_token: raw['refresh_token'] } : {}),
      ...(expiresAt ? { expires_at: expiresAt } : {}),
      raw,
    };
    return saveSessionConnection(deps, session, integration.unique_key, credentials, flow.connection_config);
  };
}
