import type { ProxyCredentials, ProxyRequestMeta } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';

/** Percent-decoding rounds looked through for a dot segment: a server may decode more than once. */
const DECODE_ROUNDS = 4;
const SEPARATORS = /[/\\]/;
const CONTROL = /[\u0000-\u001f\u007f#]/;
const MAY_HIDE_DOT_SEGMENT = /[.%\\]/;

/** Whether a path segment, at any depth of percent-decoding, is or holds a `.` or `..` segment. */
function hidesDotSegment(segment: string): boolean {
  let current = segment;
  for (let round = 0; round <= DECODE_ROUNDS; round++) {
    if (current.split(SEPARATORS).some((part) => part === '.' || part === '..')) return true;
    if (!current.includes('%')) return false;
    let decoded: string;
    try {
      decoded = decodeURIComponent(current);
    } catch {
      if (round === 0) throw new AppError('invalid_uri_params', 'The path holds a malformed percent escape');
      return false; // a literal % once decoded: nothing more is encoded
    }
    if (decoded === current) return false;
    current = decoded;
  }
  return true; // encoded deeper than any server decodes: refused rather than guessed at
}

/**
 * The path on the provider's API, checked: it may not hold a dot segment (`..`, `%2e%2E`,
 * `..%2f`, `%252e%252e`, backslashes as separators), a fragment or control characters, so a
 * call can never leave the base path the provider or the override gives.
 */
export function checkedPath(path: string): string {
  if (CONTROL.test(path)) throw new AppError('invalid_uri_params', 'The path holds a control character or a fragment');
  const trimmed = path.replace(/^[/\\]+/, '');
  // Most paths hold no dot, escape or backslash: nothing to look through.
  if (!MAY_HIDE_DOT_SEGMENT.test(trimmed)) return trimmed;
  if (trimmed.split(SEPARATORS).some(hidesDotSegment)) {
    throw new AppError('invalid_uri_params', "The path may not hold . or .. segments, encoded or not: it must stay under the provider's base path");
  }
  return trimmed;
}

/** Whether `host` (a URL's host: lower-case, port only when not the default) is one of `allowed` (see `allowedHostSchema`). */
export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  for (const entry of allowed) {
    const pattern = entry.toLowerCase();
    if (pattern === host) return true;
    if (pattern.startsWith('*.') && host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1) return true;
  }
  return false;
}

/**
 * The upstream URL: base (the provider's, or a `Base-Url-Override`) + the checked path + the
 * caller's query + the provider's query credentials. An override gets the connection's
 * credentials only on a host the provider's base URL, the catalog or the integration names
 * (`allowed_hosts`), and over https unless the provider's own base URL is http (loopback test
 * providers): otherwise a `proxy`-scoped key could send any credential anywhere.
 */
export function targetUrl(meta: ProxyRequestMeta, credentials: ProxyCredentials): URL {
  const override = meta.base_url_override;
  const base = override ?? credentials.base_url;
  if (!base) throw new AppError('invalid_headers', `Provider "${credentials.provider}" has no API base URL: send Base-Url-Override`);
  const { url: baseUrl, path: basePath } = parsedBase(base);
  if (override !== undefined) checkOverride(baseUrl, credentials);

  // A function's endpoint may carry its own query (`/items?limit=2`); the caller's query wins.
  const queryAt = meta.path.indexOf('?');
  const path = queryAt < 0 ? meta.path : meta.path.slice(0, queryAt);
  const query = meta.query || (queryAt < 0 ? '' : meta.path.slice(queryAt + 1));
  // One parse of the whole target, read as the URL setters read a path and a query: the path
  // holds no `?` or `#` (split off, or refused), and a `#` in the query is the query's (encoded).
  const search = query ? `?${query.includes('#') ? query.replaceAll('#', '%23') : query}` : baseUrl.search;
  const url = new URL(`${baseUrl.origin}${basePath}/${checkedPath(path)}${search}`);
  // Defence in depth: whatever the parser made of the path, it is still under the base path.
  if (!url.pathname.startsWith(`${basePath}/`)) throw new AppError('invalid_uri_params', "The path must stay under the provider's base path");
  let injected: string[] | undefined;
  for (const name in credentials.query) (injected ??= []).push(name);
  if (injected !== undefined) url.search = withInjectedQuery(url.search.slice(1), injected, credentials.query);
  return url;
}

/**
 * The caller's query as sent, less any parameter named like an injected one (as a header
 * would: the provider sees one value, ours), then the injected ones. Written again as a form
 * (`URLSearchParams`), the caller's own parameters would change on the way: `%20` to `+`, `:`
 * to `%3A`, a bare `flag` to `flag=`.
 */
function withInjectedQuery(query: string, names: readonly string[], values: Readonly<Record<string, string>>): string {
  // Each pair's name decoded as a form decodes it (`URLSearchParams`), the pair kept as sent.
  const kept = query.split('&').filter((pair) => pair !== '' && !names.includes(new URLSearchParams(pair).keys().next().value ?? ''));
  kept.push(new URLSearchParams(values).toString());
  return kept.join('&');
}

/** The last base URL parsed and checked, kept: most calls go to the base of the call before. */
let lastBase: { text: string; url: URL; path: string } | undefined;

/** A base URL, parsed and checked (http or https, no user information), and its path without trailing slashes. */
function parsedBase(base: string): { url: URL; path: string } {
  if (lastBase?.text === base) return lastBase;
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new AppError('invalid_headers', 'The upstream URL is not valid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new AppError('upstream_not_allowed', 'Only http and https upstreams are allowed');
  if (url.username || url.password) throw new AppError('invalid_headers', 'The upstream URL may not hold user information');
  lastBase = { text: base, url, path: url.pathname.replace(/\/+$/, '') };
  return lastBase;
}

function checkOverride(override: URL, credentials: ProxyCredentials): void {
  const own = credentials.base_url === undefined ? undefined : safeUrl(credentials.base_url);
  const allowed = [...(own ? [own.host] : []), ...(credentials.allowed_hosts ?? [])];
  if (!hostAllowed(override.host, allowed)) {
    throw new AppError(
      'upstream_not_allowed',
      `Base-Url-Override: host ${override.host} is not one of this integration's hosts; add it to the integration's allowed_hosts`,
    );
  }
  if (override.protocol === 'http:' && own?.protocol !== 'http:') {
    throw new AppError('upstream_not_allowed', 'Base-Url-Override: credentials are sent over https only');
  }
}

function safeUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}
