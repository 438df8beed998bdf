import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { RequestOf, vaultContracts } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import type { HttpClient } from '@latchkey/net';
import { oauth1Header } from '@latchkey/oauth1';
import { interpolate } from '../catalog/interpolate.js';
import type { Provider } from '../catalog/provider-schema.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { OAuthSessionDoc, OAuthSessionRepo } from '../db/oauth-session-model.js';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import { SESSION_CLIENT_SECRET_PLACE } from '../domain/connect-sessions.js';
import type { StoredCredentials } from '../domain/connection-credentials.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';
import { callTokenEndpoint, forEndUser } from '../refresh/token-endpoint.js';
import { expiryFrom, postToken } from '../refresh/fresh-credentials.js';
import { fillProviderUrl } from '../catalog/provider-url.js';

/** An authorization must come back within this long. */
const STATE_LIFETIME_MS = 10 * 60 * 1000;
const VERIFIER_PLACE = { field: 'oauth.code_verifier' };
const REQUEST_SECRET_PLACE = { field: 'oauth1.request_token_secret' };
const CLIENT_OVERRIDE_PLACE = { field: 'oauth.client_override' };
const clientOverrideSchema = z.object({ client_id: z.string(), client_secret: z.string() });

type Deps = Pick<VaultDeps, 'cipher' | 'logger'> &
  Pick<VaultServices, 'integrationService' | 'sessionService'> & {
  oauthSessions: OAuthSessionRepo;
  catalog: { get(name: string): Provider | undefined };
  timeoutMs: number;
  http: HttpClient;
};

/**
 * The end user's own OAuth client, when they gave one: allowed only where the session's
 * defaults for the integration set `oauth_client_id_override` to an empty string (the spec's
 * signal to offer the fields). A client the customer filled in there applies as is; the end
 * user cannot replace it.
 */
async function clientOverrideFor(
  deps: Pick<Deps, 'cipher'>,
  session: ConnectSessionDoc,
  integration: { _id: string; unique_key: string },
  given: { client_id: string; client_secret: string } | undefined,
) {
  const integrationKey = integration.unique_key;
  const defaults = (session.integrations_config_defaults[integrationKey]?.connection_config ?? {}) as Record<string, unknown>;
  const offered = defaults['oauth_client_id_override'] === '';
  if (given && !offered) {
    throw new AppError('invalid_body', `This connect session does not let the end user bring an OAuth client for "${integrationKey}"`, {
      errors: [{ code: 'not_allowed', message: 'no oauth_client_id_override in integrations_config_defaults', path: 'client_override' }],
    });
  }
  if (given) return given;
  const id = defaults['oauth_client_id_override'];
  // Sealed when the session was made (a session stored before that has it in the defaults).
  const sealed = session.client_secrets?.[integrationKey];
  const secret = sealed
    ? await deps.cipher.decrypt(environmentId(session.environment_id), { integrationId: integration._id, ...SESSION_CLIENT_SECRET_PLACE }, sealed)
    : defaults['oauth_client_secret_override'];
  return typeof id === 'string' && id !== '' && typeof secret === 'string' && secret !== '' ? { client_id: id, client_secret: secret } : undefined;
}

/**
 * `vault.oauth.start`: the provider's authorization URL for an end user's session.
 * OAuth 2: a single-use `state`, PKCE S256 (unless the provider disables it), the exact
 * redirect URI, the provider's scopes joined its way and its authorization parameters.
 * OAuth 1.0a: temporary credentials from the provider's request URL (signed with the
 * integration's consumer key, `oauth_callback` = the redirect URI), kept single-use like a state.
 */
export function startOAuthHandler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.startOAuth>) => {
    const session = await deps.sessionService.live({ token: request.token });
    const integration = await deps.sessionService.allowedIntegration(session, request.integration);
    const provider = deps.catalog.get(integration.provider);
    if (!provider?.authorization_url || (provider.auth_mode !== 'OAUTH2' && provider.auth_mode !== 'OAUTH1')) {
      throw new AppError('invalid_uri_params', `Integration "${integration.unique_key}" does not use OAuth`);
    }
    const override = await clientOverrideFor(deps, session, integration, request.client_override);
    const client = override ?? (await deps.integrationService.clientCredentials(integration));
    if (!client['client_id']) throw new AppError('invalid_body', `Integration "${integration.unique_key}" has no client_id`);
    const connectionConfig = (await deps.sessionService.flowConnectionConfig(session, integration, provider, request.connection_config, {
      customerClient: request.client_override === undefined,
    })) as Record<string, string>;
    const environment = environmentId(session.environment_id);
    const now = new Date();
    const flow = {
      _id: randomUUID(),
      environment_id: session.environment_id,
      session_digest: session.digest,
      integration: integration.unique_key,
      redirect_uri: request.redirect_uri,
      client_override: override ? await deps.cipher.encryptJson(environment, { integrationId: integration._id, ...CLIENT_OVERRIDE_PLACE }, override) : null,
      connection_config: connectionConfig,
      created_at: now,
      expires_at: new Date(now.getTime() + STATE_LIFETIME_MS),
    };
    if (provider.auth_mode === 'OAUTH1') {
      const consumer = { key: client['client_id'], secret: client['client_secret'] ?? '' };
      const temporary = await requestTemporaryCredentials(deps, provider, consumer, connectionConfig, request.redirect_uri).catch((error: unknown) => {
        throw forEndUser(error, deps.logger);
      });
      await deps.oauthSessions.insert({
        ...flow,
        state: temporary.token,
        code_verifier: null,
        request_token_secret: await deps.cipher.encrypt(environment, { integrationId: integration._id, ...REQUEST_SECRET_PLACE }, temporary.secret),
      });
      const url = new URL(fillProviderUrl(provider.authorization_url, connectionConfig, provider.connection_config));
      for (const [name, template] of Object.entries(provider.authorization_params ?? {})) url.searchParams.set(name, interpolate(template, { connectionConfig }));
      for (const [name, value] of Object.entries(request.authorization_params ?? {})) url.searchParams.set(name, value);
      url.searchParams.set('oauth_token', temporary.token);
      return { url: url.toString() };
    }
    const state = randomBytes(32).toString('base64url');
    const verifier = provider.disable_pkce ? null : randomBytes(48).toString('base64url');
    await deps.oauthSessions.insert({
      ...flow,
      state,
      code_verifier: verifier ? await deps.cipher.encrypt(environment, { integrationId: integration._id, ...VERIFIER_PLACE }, verifier) : null,
    });
    const url = new URL(fillProviderUrl(provider.authorization_url, connectionConfig, provider.connection_config));
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

/** Takes a flow by its state, once: unknown, used and expired ones are refused. */
async function takeFlow(deps: Pick<Deps, 'oauthSessions'>, state: string): Promise<OAuthSessionDoc> {
  const flow = await deps.oauthSessions.consume(state);
  if (!flow || flow.expires_at.getTime() <= Date.now()) throw new AppError('invalid_query_params', 'This authorization is unknown, expired or already used; start again');
  return flow;
}

/** The flow behind a state (or OAuth 1 temporary token): known, unused, unexpired, its session live and its integration still allowed. */
async function consumeFlow(deps: Deps, state: string) {
  const flow = await takeFlow(deps, state);
  const session = await deps.sessionService.live({ digest: flow.session_digest });
  const integration = await deps.sessionService.allowedIntegration(session, flow.integration);
  const provider = deps.catalog.get(integration.provider);
  if (!provider) throw new AppError('unknown_provider', `Provider "${integration.provider}" is not in the catalog`);
  const override = flow.client_override
    ? await deps.cipher.decryptJson(environmentId(flow.environment_id), { integrationId: integration._id, ...CLIENT_OVERRIDE_PLACE }, flow.client_override, clientOverrideSchema)
    : undefined;
  return { flow, session, integration, provider, override };
}

/**
 * A failure of a flow whose environment is known, naming it (`payload.environment_id`): the
 * gateway posts the failure to that environment's registered origins, as it posts a success.
 */
function inEnvironment(error: unknown, environment: string): AppError {
  const appError = toAppError(error);
  return new AppError(appError.code, appError.message, { ...(appError.errors ? { errors: appError.errors } : {}), payload: { ...appError.payload, environment_id: environment }, cause: appError.cause });
}

/** `vault.oauth.refuse`: the provider sent the end user back with an error; the flow is spent. */
export function refuseOAuthHandler(deps: Pick<Deps, 'oauthSessions'>) {
  return async (request: RequestOf<typeof vaultContracts.refuseOAuth>) => {
    return { environment_id: (await takeFlow(deps, request.state)).environment_id };
  };
}

/** The provider's refusal of an authorization, said as such (its error code and description only). */
function refusedAuthorization(error: unknown): AppError {
  const appError = toAppError(error);
  if (appError.code !== 'refresh_token_external_error') return appError;
  const payload = appError.payload ?? {};
  // No answer at all is no refusal: `forEndUser` says it, as one answer whatever the reason.
  if (payload['error'] === 'unreachable' && typeof payload['status'] !== 'number') return appError;
  const description = typeof payload['error_description'] === 'string' ? ` (${payload['error_description']})` : '';
  return new AppError('refresh_token_external_error', `The provider refused the authorization: ${String(payload['error'] ?? 'refused')}${description}`, { payload });
}

/**
 * RFC 9207: an authorization response that names its issuer must name the provider's, and a
 * provider that declares it always does so must have. Checked before the code is exchanged: a
 * response from another authorization server (a mix-up attack) never gets the client secret or
 * the PKCE verifier. The flow's state is already spent, so a refused response cannot be retried.
 */
function checkIssuer(provider: Provider, connectionConfig: Record<string, unknown>, iss: string | undefined): void {
  if (iss === undefined) {
    if (provider.authorization_response_iss_parameter_supported) {
      throw new AppError('invalid_query_params', 'The authorization response did not name its issuer (iss); start again');
    }
    return;
  }
  if (provider.issuer === undefined) return;
  if (iss !== fillProviderUrl(provider.issuer, connectionConfig, provider.connection_config)) {
    throw new AppError('invalid_query_params', 'The authorization response came from another issuer than the provider; start again');
  }
}

/**
 * `vault.oauth.finish`: the provider sent the end user back. The code is exchanged (with the
 * PKCE verifier and the client that started the flow) and the connection saved with the tokens,
 * `expires_at`, the raw answer and, for an end user's own client, `config_override` so that
 * refreshes use it too.
 */
export function finishOAuthHandler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.finishOAuth>) => {
    const { flow, session, integration, provider, override } = await consumeFlow(deps, request.state);
    try {
      if (provider.auth_mode !== 'OAUTH2') throw new AppError('invalid_query_params', 'This authorization is not an OAuth 2 one; start again');
      checkIssuer(provider, flow.connection_config, request.iss);
      const client = override ?? (await deps.integrationService.clientCredentials(integration));
      const now = new Date();
      const form: Record<string, string> = { grant_type: 'authorization_code', code: request.code, redirect_uri: flow.redirect_uri, ...provider.token_params };
      if (flow.code_verifier) {
        form['code_verifier'] = await deps.cipher.decrypt(environmentId(flow.environment_id), { integrationId: integration._id, ...VERIFIER_PLACE }, flow.code_verifier);
      }
      const raw = await postToken(
        { provider, connectionConfig: flow.connection_config, timeoutMs: deps.timeoutMs, http: deps.http },
        form,
        client['client_id'],
        client['client_secret'],
      ).catch((error: unknown) => {
        throw refusedAuthorization(error);
      });
      const expiresAt = expiryFrom(raw, now);
      const credentials: StoredCredentials = {
        type: 'OAUTH2',
        access_token: raw['access_token'],
        ...(typeof raw['refresh_token'] === 'string' ? { refresh_token: raw['refresh_token'] } : {}),
        ...(expiresAt ? { expires_at: expiresAt } : {}),
        ...(override ? { config_override: override } : {}),
        raw,
      };
      // The environment lets the gateway post the outcome to that environment's registered origins only.
      return { ...(await deps.sessionService.saveConnection(session, integration.unique_key, credentials, flow.connection_config)), environment_id: session.environment_id };
    } catch (error) {
      throw inEnvironment(forEndUser(error, deps.logger), flow.environment_id);
    }
  };
}

/** Form-encoded answers of OAuth 1.0a endpoints (RFC 5849, 2.1 and 2.3). */
function formAnswer(body: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(body));
}

/** A refused OAuth 1 step: the provider's `oauth_problem` when it gives one, never its whole answer. */
function oauth1Refusal(step: string, status: number, body: string): AppError {
  const problem = formAnswer(body)['oauth_problem'];
  const reason = problem && /^[\w .:-]{1,200}$/.test(problem) ? problem : `http_${status}`;
  return new AppError('refresh_token_external_error', `The provider refused the ${step}: ${reason}`, { payload: { status, error: reason } });
}

/** RFC 5849, 2.1: temporary credentials, with `oauth_callback` signed in. */
async function requestTemporaryCredentials(
  deps: Pick<Deps, 'timeoutMs' | 'http'>,
  provider: Provider,
  consumer: { key: string; secret: string },
  connectionConfig: Record<string, string>,
  callback: string,
): Promise<{ token: string; secret: string }> {
  if (!provider.request_url) throw new AppError('invalid_uri_params', 'The provider has no request token URL');
  const url = fillProviderUrl(provider.request_url, connectionConfig, provider.connection_config);
  const authorization = oauth1Header({ method: 'POST', url, consumerKey: consumer.key, consumerSecret: consumer.secret, protocolParams: { oauth_callback: callback } });
  const response = await callTokenEndpoint(deps.http, url, { headers: { authorization, accept: 'application/x-www-form-urlencoded, application/json' }, timeoutMs: deps.timeoutMs });
  if (response.statusCode >= 300) throw oauth1Refusal('request for a temporary token', response.statusCode, response.body);
  const answer = formAnswer(response.body);
  if (!answer['oauth_token'] || !answer['oauth_token_secret']) {
    throw new AppError('refresh_token_external_error', 'The provider answered the temporary token request without a token', { payload: { error: 'no_token' } });
  }
  return { token: answer['oauth_token'], secret: answer['oauth_token_secret'] };
}

/**
 * `vault.oauth1.finish`: the provider sent the end user back with the temporary token and a
 * verifier. The token names a single-use flow (unknown, used or expired ones are refused); the
 * verifier, signed with the temporary secret, buys the token credentials (RFC 5849, 2.3), saved
 * as an OAUTH1 connection with the raw answer.
 */
export function finishOAuth1Handler(deps: Deps) {
  return async (request: RequestOf<typeof vaultContracts.finishOAuth1>) => {
    const { flow, session, integration, provider, override } = await consumeFlow(deps, request.oauth_token);
    try {
      if (provider.auth_mode !== 'OAUTH1' || !flow.request_token_secret) {
        throw new AppError('invalid_query_params', 'This authorization is not an OAuth 1.0a one; start again');
      }
      const client = override ?? (await deps.integrationService.clientCredentials(integration));
      const temporarySecret = await deps.cipher.decrypt(environmentId(flow.environment_id), { integrationId: integration._id, ...REQUEST_SECRET_PLACE }, flow.request_token_secret);
      const credentials = await exchangeVerifier(deps, provider, integration, client, flow, { token: request.oauth_token, secret: temporarySecret }, request.oauth_verifier);
      const saved = await deps.sessionService.saveConnection(session, integration.unique_key, { ...credentials, ...(override ? { config_override: override } : {}) }, flow.connection_config);
      return { ...saved, environment_id: session.environment_id };
    } catch (error) {
      throw inEnvironment(forEndUser(error, deps.logger), flow.environment_id);
    }
  };
}

async function exchangeVerifier(
  deps: Pick<Deps, 'timeoutMs' | 'http'>,
  provider: Provider,
  integration: IntegrationDoc,
  client: Record<string, string>,
  flow: OAuthSessionDoc,
  temporary: { token: string; secret: string },
  verifier: string,
) {
  const url = fillProviderUrl(provider.token_url ?? '', flow.connection_config, provider.connection_config);
  const authorization = oauth1Header({
    method: 'POST',
    url,
    consumerKey: client['client_id'] ?? '',
    consumerSecret: client['client_secret'] ?? '',
    token: temporary.token,
    tokenSecret: temporary.secret,
    protocolParams: { oauth_verifier: verifier },
  });
  const response = await callTokenEndpoint(deps.http, url, { headers: { authorization, accept: 'application/x-www-form-urlencoded, application/json' }, timeoutMs: deps.timeoutMs });
  if (response.statusCode >= 300) throw oauth1Refusal(`authorization of "${integration.unique_key}"`, response.statusCode, response.body);
  const raw = formAnswer(response.body);
  if (!raw['oauth_token'] || !raw['oauth_token_secret']) {
    throw new AppError('refresh_token_external_error', 'The provider answered without token credentials', { payload: { error: 'no_token' } });
  }
  return { type: 'OAUTH1' as const, oauth_token: raw['oauth_token'], oauth_token_secret: raw['oauth_token_secret'], raw };
}
