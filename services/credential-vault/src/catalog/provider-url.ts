import { AppError } from '@latchkey/errors';
import { interpolateUrl, refusedUrlConfig } from './interpolate.js';

/** What the catalog says about one connection config field (its `connection_config` entry). */
export type ConfigFieldRules = Readonly<Record<string, { pattern?: string | undefined }>> | undefined;

const PLACEHOLDER = /\$\{connectionConfig\.([A-Za-z0-9_.-]+)\}/g;
/** One DNS label: what a host-bearing value must be when the catalog gives no pattern. */
const DNS_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/**
 * Never part of a host-bearing value, whatever a pattern allows: each could end the authority
 * early or smuggle userinfo (`@`), a query or fragment (`?`, `#`), a backslash (read as `/`),
 * an escape the URL parser would decode (`%`), a break, or the start of another placeholder.
 */
const NEVER_IN_HOST = /[@?#\\%\s${}]/;

/** The authority of a URL template (between `scheme://` and the first `/`, `?` or `#`). */
function authorityOf(template: string): string {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(template)?.[1] ?? '';
}

/** The connection config keys a URL template places in its host (or port). */
export function hostBearingKeys(template: string): string[] {
  return [...authorityOf(template).matchAll(PLACEHOLDER)].map((match) => match[1] ?? '');
}

/**
 * The keys a URL template's host is wholly made of: no fixed domain after them (`https://${host}/`
 * rather than `https://${subdomain}.okta.com/`), so their value sends the request anywhere.
 */
export function freeHostKeys(template: string): string[] {
  return fixedSuffixOf(template).startsWith('.') ? [] : hostBearingKeys(template);
}

/** The fixed text after the last placeholder of the authority (`.okta.com`), lower-cased; '' if none. */
function fixedSuffixOf(template: string): string {
  const authority = authorityOf(template);
  const parts = authority.split(PLACEHOLDER);
  // split with a capture group alternates literal, key, literal…; the last literal follows the last key.
  return parts.length > 1 ? (parts[parts.length - 1] ?? '').toLowerCase() : '';
}

function refused(key: string, why: string): AppError {
  // The message names the field and the rule, never the value (it may be an attacker's URL).
  return new AppError('invalid_body', `connection_config.${key} ${why}`, {
    errors: [{ code: 'invalid_host', message: why, path: `connection_config.${key}` }],
  });
}

/**
 * Checks one host-bearing value: it matches the catalog's pattern for the field (anchored), or
 * is a single DNS label where the catalog has none, and never holds a character that could move
 * the URL's host elsewhere.
 */
export function checkHostValue(key: string, value: unknown, fields: ConfigFieldRules): void {
  if (typeof value !== 'string' && typeof value !== 'number') throw refused(key, 'must be a host name');
  const text = String(value);
  if (text === '' || NEVER_IN_HOST.test(text)) throw refused(key, 'is not a valid host name for this provider');
  const pattern = fields?.[key]?.pattern;
  const allowed = pattern === undefined ? DNS_LABEL.test(text) : new RegExp(`^(?:${pattern})$`).test(text);
  if (!allowed) throw refused(key, pattern === undefined ? 'must be a single DNS label' : "does not match the provider's pattern");
}

/**
 * Checks every value of `config` that lands in the host of the provider's authorization, token,
 * request or token-request URL (`checkHostValue`), and every value its API base URL places (by
 * the rules the proxy fills it with), whoever set it: a connection's config is refused when it is
 * given, not at each later refresh or call.
 */
export function checkHostValues(
  provider: {
    authorization_url?: string | undefined;
    token_url?: string | undefined;
    request_url?: string | undefined;
    token_request?: { url: string } | undefined;
    proxy?: { base_url?: string | undefined } | undefined;
    connection_config?: ConfigFieldRules;
  },
  config: Record<string, unknown>,
): void {
  for (const template of [provider.authorization_url, provider.token_url, provider.request_url, provider.token_request?.url]) {
    if (template === undefined) continue;
    for (const key of hostBearingKeys(template)) {
      if (config[key] !== undefined) checkHostValue(key, config[key], provider.connection_config);
    }
  }
  const refused = provider.proxy?.base_url === undefined ? [] : refusedUrlConfig(provider.proxy.base_url, config);
  if (refused.length > 0) {
    throw new AppError('invalid_body', `connection_config.${refused[0]!.key} does not fit the provider's API URL`, {
      errors: refused.map(({ key, message }) => ({ code: 'invalid_value', message, path: `connection_config.${key}` })),
    });
  }
}

/**
 * Fills a provider URL template (authorization, token, OAuth 1 request URL) with connection
 * config. This is the one place such a URL gets its host: host-bearing values are checked
 * (`checkHostValue`) and inserted as they are; other values are percent-encoded for their place.
 * The result must keep the template's scheme and the fixed suffix of its host (a
 * `https://${connectionConfig.subdomain}.okta.com/…` URL always ends up at a host under
 * `.okta.com`), else it is refused.
 */
export function fillProviderUrl(template: string, connectionConfig: Record<string, unknown>, fields: ConfigFieldRules): string {
  const hostKeys = new Set(hostBearingKeys(template));
  for (const [, key = ''] of template.matchAll(PLACEHOLDER)) {
    const value = connectionConfig[key];
    if (value === undefined || value === null) {
      throw new AppError('invalid_body', `connection_config.${key} is needed by the provider's URL`, {
        errors: [{ code: 'required', message: 'is required by this provider', path: `connection_config.${key}` }],
      });
    }
    if (hostKeys.has(key)) checkHostValue(key, value, fields);
  }
  // A host-bearing value the provider's pattern accepted goes in as it is (a self-hosted server's
  // host may carry a path prefix); every other value is placed by the one URL filler, which
  // encodes it for its part of the URL.
  const withHosts = template.replace(PLACEHOLDER, (whole, key: string) => (hostKeys.has(key) ? String(connectionConfig[key]) : whole));
  let filled: string;
  try {
    filled = interpolateUrl(withHosts, { connectionConfig });
  } catch (error) {
    throw refused([...template.matchAll(PLACEHOLDER)].map((match) => match[1]).join(', '), `cannot be placed in the provider's URL (${(error as Error).message})`);
  }
  if (hostKeys.size === 0) return filled;
  let url: URL;
  let scheme: string;
  try {
    url = new URL(filled);
    scheme = new URL(template.replace(PLACEHOLDER, 'x')).protocol;
  } catch {
    throw refused([...hostKeys].join(', '), 'does not make a valid URL');
  }
  const suffix = fixedSuffixOf(template);
  if (url.protocol !== scheme || url.username !== '' || url.password !== '' || (suffix !== '' && !(url.host.endsWith(suffix) && url.host.length > suffix.length))) {
    throw refused([...hostKeys].join(', '), "moves the URL off the provider's host");
  }
  return filled;
}
