import { createPrivateKey } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { AppError } from '@latchkey/errors';
import { fillProviderUrl } from '../catalog/provider-url.js';
import { expiryAfter, MAX_ERROR_TEXT, refreshWithTokenRequest } from './catalog-token-request.js';
import type { StoredCredentials } from '../domain/connection-credentials.js';
import { credentialsOfType, type CredentialsOf, type RefreshContext } from './refresh-context.js';
import { callTokenEndpoint } from './token-endpoint.js';

/**
 * The provider's error answer, reduced to fields that carry no secrets, each cut to
 * `MAX_ERROR_TEXT`: it is stored with the connection, logged, shown to the customer and sent in
 * the refresh-failed event (a megabyte of `error_description` failed that event, and every
 * answer of the back-off after it).
 */
export function providerError(status: number, body: string): AppError {
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(body) as Record<string, unknown>;
  } catch {
    parsed = Object.fromEntries(new URLSearchParams(body));
  }
  const error = typeof parsed['error'] === 'string' ? parsed['error'].slice(0, MAX_ERROR_TEXT) : `http_${status}`;
  const description = typeof parsed['error_description'] === 'string' ? parsed['error_description'].slice(0, MAX_ERROR_TEXT) : undefined;
  return new AppError('refresh_token_external_error', `The provider refused to refresh the token: ${error}${description ? ` (${description})` : ''}`, {
    payload: { status, error, ...(description ? { error_description: description } : {}) },
  });
}

/** A token endpoint's answer that carries an access token, with whatever else the provider sent. */
export type TokenAnswer = Record<string, unknown> & { access_token: string };

/** POSTs a form to the provider's token endpoint with the client authenticated its way; the parsed answer. */
export async function postToken(context: Pick<RefreshContext, 'provider' | 'connectionConfig' | 'timeoutMs' | 'http'>, form: Record<string, string>, clientId: string | undefined, clientSecret: string | undefined) {
  const url = context.provider.token_url;
  if (!url) throw new AppError('refresh_token_external_error', 'The provider has no token URL');
  const headers: Record<string, string> = { accept: 'application/json' };
  const body = { ...form };
  if (clientId !== undefined) {
    if (context.provider.token_request_auth_method === 'basic') {
      const encode = (value: string) => encodeURIComponent(value);
      headers['authorization'] = `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret ?? '')}`).toString('base64')}`;
    } else {
      body['client_id'] = clientId;
      if (clientSecret !== undefined) body['client_secret'] = clientSecret;
    }
  }
  const response = await callTokenEndpoint(context.http, fillProviderUrl(url, context.connectionConfig, context.provider.connection_config), { form: body, headers, timeoutMs: context.timeoutMs });
  if (response.statusCode >= 300) throw providerError(response.statusCode, response.body);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(response.body) as Record<string, unknown>;
  } catch {
    raw = Object.fromEntries(new URLSearchParams(response.body));
  }
  if (typeof raw['access_token'] !== 'string') {
    throw new AppError('refresh_token_external_error', 'The provider answered without an access_token', { payload: { error: 'no_access_token' } });
  }
  return raw as TokenAnswer;
}

export function expiryFrom(raw: Record<string, unknown>, now: Date): string | undefined {
  const seconds = Number(raw['expires_in']);
  return Number.isFinite(seconds) && seconds > 0 ? expiryAfter(now, seconds) : undefined;
}

/** OAUTH2: refresh-token grant with the connection's client override or the integration's client. */
async function refreshOAuth2(context: RefreshContext): Promise<CredentialsOf<'OAUTH2'>> {
  const { client } = context;
  const credentials = credentialsOfType(context.credentials, 'OAUTH2');
  const refreshToken = credentials.refresh_token;
  if (typeof refreshToken !== 'string') {
    throw new AppError('refresh_token_external_error', 'The connection has no refresh token', { payload: { error: 'no_refresh_token' } });
  }
  const override = credentials.config_override ?? {};
  const raw = await postToken(
    context,
    { grant_type: 'refresh_token', refresh_token: refreshToken, ...context.provider.refresh_params },
    override.client_id ?? client['client_id'],
    override.client_secret ?? client['client_secret'],
  );
  const expiresAt = expiryFrom(raw, context.now);
  return {
    type: 'OAUTH2',
    access_token: raw['access_token'],
    // Providers that do not rotate refresh tokens answer without one: keep ours.
    refresh_token: typeof raw['refresh_token'] === 'string' ? raw['refresh_token'] : refreshToken,
    ...(expiresAt ? { expires_at: expiresAt } : {}),
    ...(credentials.config_override ? { config_override: credentials.config_override } : {}),
    raw,
  };
}

/**
 * OAUTH2_CC: a token by the client-credentials grant, for a client that has none yet (a connect
 * flow) or to renew a connection's.
 */
export async function clientCredentialsToken(
  context: Omit<RefreshContext, 'credentials' | 'client'>,
  client: Pick<CredentialsOf<'OAUTH2_CC'>, 'client_id' | 'client_secret'>,
): Promise<CredentialsOf<'OAUTH2_CC'>> {
  const raw = await postToken(context, { grant_type: 'client_credentials', ...context.provider.token_params }, client.client_id, client.client_secret);
  const expiresAt = expiryFrom(raw, context.now);
  return {
    type: 'OAUTH2_CC',
    client_id: client.client_id,
    client_secret: client.client_secret,
    token: raw['access_token'],
    ...(expiresAt ? { expires_at: expiresAt } : {}),
    raw,
  };
}

/** The JWS algorithm a PEM private key signs with; undefined when the key cannot be read. */
export function algorithmForKey(pem: string): jwt.Algorithm | undefined {
  let key;
  try {
    key = createPrivateKey(pem);
  } catch {
    return undefined;
  }
  if (key.asymmetricKeyType === 'rsa') return 'RS256';
  if (key.asymmetricKeyType === 'ec') {
    // The curve decides the algorithm (RFC 7518 §3.4); App Store Connect's .p8 keys are P-256.
    const curve = key.asymmetricKeyDetails?.namedCurve;
    return curve === 'secp384r1' ? 'ES384' : curve === 'secp521r1' ? 'ES512' : 'ES256';
  }
  return undefined;
}

/** A JWT signed here lives this long unless its provider entry says otherwise (`jwt.lifetime_seconds`). */
const JWT_LIFETIME_SECONDS = 20 * 60;

/**
 * JWT: a token signed here, valid 20 minutes (or the provider's `jwt.lifetime_seconds`), with
 * the provider's `jwt.audience` as `aud`; an `{id, secret}` key signs HS256 with that key id.
 */
function refreshJwt(context: RefreshContext): CredentialsOf<'JWT'> {
  const { now } = context;
  const credentials = credentialsOfType(context.credentials, 'JWT');
  const privateKey = credentials.privateKey;
  const issuedAt = Math.floor(now.getTime() / 1000);
  const expiresAt = issuedAt + (context.provider.jwt?.lifetime_seconds ?? JWT_LIFETIME_SECONDS);
  const audience = context.provider.jwt?.audience;
  const claims = { iat: issuedAt, exp: expiresAt, ...(credentials.issuerId ? { iss: credentials.issuerId } : {}), ...(audience ? { aud: audience } : {}) };
  const unusable = (what: string) =>
    new AppError('refresh_token_external_error', `The connection's privateKey is not ${what}`, { payload: { error: 'invalid_private_key' } });
  let token: string;
  if (typeof privateKey === 'string') {
    const algorithm = algorithmForKey(privateKey);
    if (!algorithm) throw unusable('an RSA or EC private key in PEM form');
    token = jwt.sign(claims, privateKey, { algorithm, ...(credentials.privateKeyId ? { keyid: credentials.privateKeyId } : {}) });
  } else {
    if (!/^(?:[0-9a-fA-F]{2})+$/.test(privateKey.secret)) throw unusable('an {id, secret} key with a hex secret');
    token = jwt.sign(claims, Buffer.from(privateKey.secret, 'hex'), { algorithm: 'HS256', keyid: privateKey.id });
  }
  return { ...credentials, token, expires_at: new Date(expiresAt * 1000).toISOString() };
}

/** APP: an installation token bought with a JWT signed by the app's private key. */
async function refreshApp(context: RefreshContext): Promise<CredentialsOf<'APP'>> {
  const { client, now } = context;
  if (!client['app_id'] || !client['private_key']) {
    throw new AppError('refresh_token_external_error', 'The integration lacks app_id or private_key', { payload: { error: 'misconfigured_app' } });
  }
  const issuedAt = Math.floor(now.getTime() / 1000) - 30;
  let appJwt: string;
  try {
    appJwt = jwt.sign({ iat: issuedAt, exp: issuedAt + 9 * 60, iss: client['app_id'] }, client['private_key'], { algorithm: 'RS256' });
  } catch {
    throw new AppError('refresh_token_external_error', "The integration's private_key cannot sign an RS256 JWT", { payload: { error: 'misconfigured_app' } });
  }
  const url = context.provider.token_url;
  if (!url) throw new AppError('refresh_token_external_error', 'The provider has no token URL');
  const response = await callTokenEndpoint(context.http, fillProviderUrl(url, context.connectionConfig, context.provider.connection_config), {
    headers: { authorization: `Bearer ${appJwt}`, accept: 'application/json' },
    timeoutMs: context.timeoutMs,
  });
  if (response.statusCode >= 300) throw providerError(response.statusCode, response.body);
  let parsed: unknown;
  try {
    parsed = JSON.parse(response.body);
  } catch {
    parsed = undefined;
  }
  const raw = (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}) as Record<string, unknown>;
  if (typeof raw['token'] !== 'string' || raw['token'] === '') {
    throw new AppError('refresh_token_external_error', 'The provider answered without an installation token', { payload: { status: response.statusCode, error: 'no_token' } });
  }
  return { type: 'APP', access_token: raw['token'], ...(typeof raw['expires_at'] === 'string' ? { expires_at: raw['expires_at'] } : {}), raw };
}

/** New credentials for a connection of a refreshable type. */
export async function requestFreshCredentials(type: string, context: RefreshContext): Promise<StoredCredentials> {
  switch (type) {
    case 'OAUTH2':
      return refreshOAuth2(context);
    case 'OAUTH2_CC':
      return clientCredentialsToken(context, credentialsOfType(context.credentials, 'OAUTH2_CC'));
    case 'JWT':
      return refreshJwt(context);
    case 'APP':
      return refreshApp(context);
    case 'TWO_STEP':
    case 'BILL':
    case 'SIGNATURE':
      return refreshWithTokenRequest(type, context);
    default:
      throw new AppError('internal_error', `credentials of type ${type} are not refreshable`);
  }
}
