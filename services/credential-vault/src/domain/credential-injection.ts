import type { ProxyCredentials } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { interpolate, interpolateUrl, templateCredentials, usesCredentials, type TemplateContext } from '../catalog/interpolate.js';
import type { Provider } from '../catalog/provider-schema.js';
import type { StoredCredentials } from './connection-credentials.js';

const str = (value: unknown) => (typeof value === 'string' ? value : undefined);

/** The token a credentials object carries, whatever its type calls it. */
function tokenOf(credentials: Record<string, unknown>): string | undefined {
  return str(credentials['access_token']) ?? str(credentials['token']) ?? str(credentials['session_id']);
}

function fill(templates: Record<string, string> | undefined, context: TemplateContext, filler = interpolate): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, template] of Object.entries(templates ?? {})) {
    try {
      out[name] = filler(template, context);
    } catch (error) {
      // The message names the placeholder, never a value. A value refused for its place in a URL
      // would have sent the call elsewhere: that is an upstream not allowed, not a missing value.
      const message = (error as Error).message;
      const code = message.startsWith('missing value') || filler === interpolate ? 'invalid_headers' : 'upstream_not_allowed';
      throw new AppError(code, `Cannot build the ${name} the provider needs: ${message}`);
    }
  }
  return out;
}

/** A realm as the Authorization header quotes it: no quote, backslash or control character can end it early. */
function headerRealm(realm: string): string {
  if (/["\\\x00-\x1f\x7f]/.test(realm)) throw new AppError('invalid_headers', 'Cannot build the realm the provider needs: it may not hold quotes, backslashes or control characters');
  return realm;
}

/**
 * Whether the catalog entry says where the credential goes (a header, a query parameter or the
 * base URL): then it goes there only, never also in a default `Authorization`.
 */
function placesCredentials(provider: Provider): boolean {
  const proxy = provider.proxy;
  if (!proxy) return false;
  return [proxy.base_url, ...Object.values(proxy.headers ?? {}), ...Object.values(proxy.query ?? {})].some(usesCredentials);
}

/**
 * How calls made with these credentials are authenticated: the provider's base URL with
 * connection config filled in, the headers and query its entry places (else the auth mode's
 * default) and OAuth 1 material. The same rules for stored connections and for credentials an
 * end user is about to save, which are verified with them first.
 */
export function injectionFor(
  provider: Provider,
  client: Record<string, string>,
  connectionConfig: Record<string, unknown>,
  credentials: StoredCredentials,
): Omit<ProxyCredentials, 'id' | 'provider' | 'expires_at'> {
  const token = tokenOf(credentials);
  const fields = templateCredentials(credentials);
  const context: TemplateContext = {
    connectionConfig,
    credentials: fields,
    apiKey: str(credentials['apiKey']),
    username: str(credentials['username']),
    password: str(credentials['password']),
    accessToken: token,
  };
  const headers = fill(provider.proxy?.headers, context);
  const hasAuthorization = Object.keys(headers).some((name) => name.toLowerCase() === 'authorization');
  const type = credentials.type;
  if (!hasAuthorization) {
    if (type === 'BASIC' && context.username !== undefined) {
      headers['Authorization'] = `Basic ${Buffer.from(`${context.username}:${context.password ?? ''}`).toString('base64')}`;
    } else if (type === 'API_KEY' && context.apiKey !== undefined && !placesCredentials(provider)) {
      headers['Authorization'] = `Bearer ${context.apiKey}`;
    } else if (token !== undefined && type !== 'OAUTH1' && type !== 'TBA') {
      headers['Authorization'] = `Bearer ${token}`;
    }
  }
  let oauth1: ProxyCredentials['oauth1'];
  if (credentials.type === 'OAUTH1' || credentials.type === 'TBA') {
    // The end user's own client, when they authorized with one, signs instead of the integration's.
    const override = credentials.config_override;
    const realm = provider.proxy?.realm;
    oauth1 = {
      consumer_key: override?.client_id ?? client['client_id'] ?? '',
      consumer_secret: override?.client_secret ?? client['client_secret'] ?? '',
      token: str(credentials['oauth_token']) ?? str(credentials['token_id']) ?? '',
      token_secret: str(credentials['oauth_token_secret']) ?? str(credentials['token_secret']) ?? '',
      signature_method: provider.proxy?.signature_method ?? (credentials.type === 'TBA' ? 'HMAC-SHA256' : 'HMAC-SHA1'),
      ...(realm === undefined ? {} : { realm: headerRealm(fill({ realm }, { connectionConfig })['realm']!) }),
    };
  }
  const baseUrl = provider.proxy?.base_url;
  const allowedHosts = provider.proxy?.allowed_hosts;
  return {
    auth_mode: provider.auth_mode,
    ...(baseUrl === undefined ? {} : { base_url: fill({ base_url: baseUrl }, { connectionConfig, credentials: fields, apiKey: context.apiKey }, interpolateUrl)['base_url']! }),
    ...(allowedHosts === undefined ? {} : { allowed_hosts: [...allowedHosts] }),
    headers,
    query: fill(provider.proxy?.query, context),
    ...(oauth1 ? { oauth1 } : {}),
    decompress: provider.proxy?.decompress ?? false,
  };
}
