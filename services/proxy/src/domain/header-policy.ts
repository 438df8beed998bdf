import { HOP_BY_HOP_HEADERS } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';

/**
 * The one rule for which of a caller's headers reach a provider, applied by the proxy to every
 * call whoever sent it (the gateway, the action-runner's functions): callers are not trusted to
 * have stripped anything. Never forwarded, whether the caller prefixed them or not:
 * - hop-by-hop headers (RFC 9110 §7.6.1) and every header the caller's `Connection` names;
 * - `Host` (the URL decides it), `Content-Length` (the body decides it), `Expect`;
 * - `Forwarded`, `X-Forwarded-*`, `X-Real-IP`, `Via`, `Proxy-*` and the other client-address
 *   headers (`True-Client-IP`, `CF-Connecting-IP`, `X-Client-IP`, `X-Originating-IP`,
 *   `X-Cluster-Client-IP`): they would speak for our network;
 * - any header the injected credentials set, whatever its letter case, so none can be overridden
 *   or doubled.
 * The caller's `Authorization` and `Cookie` go only when it sent them as `service-proxy-<name>`
 * (`CALLER_CREDENTIALS`): unprefixed, `Authorization` is the caller's key to Latchkey.
 */
const NEVER_FORWARDED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'host',
  'content-length',
  'expect',
  'authorization',
  'cookie',
  'forwarded',
  'x-real-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'x-client-ip',
  'x-originating-ip',
  'x-cluster-client-ip',
  'via',
]);
/** Of `NEVER_FORWARDED`, those a caller may still send the provider by naming them with the prefix. */
const CALLER_CREDENTIALS: ReadonlySet<string> = new Set(['authorization', 'cookie']);
const NEVER_FORWARDED_PREFIXES = ['x-forwarded-', 'proxy-'];

/**
 * RFC 9110 field names are tokens; values hold visible ASCII, spaces, tabs and obs-text (bytes
 * 0x80 to 0xFF) only: no line break, NUL or other control character, and no character beyond
 * Latin-1, which the HTTP client refuses too (a refusal that would otherwise look like a
 * network failure, and be retried).
 */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const UNSAFE_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

const NONE_LISTED: ReadonlySet<string> = new Set();

/**
 * The header names a message's `Connection` headers list, lower-case. A `Connection: keep-alive`
 * alone (what most calls and answers carry) lists none: `Keep-Alive` is hop-by-hop anyway, and
 * every caller drops those.
 */
export function connectionListed(headers: ReadonlyArray<readonly [string, string]>): ReadonlySet<string> {
  let listed: Set<string> | undefined;
  for (const [name, value] of headers) {
    // Every call and every answer passes here: most names are told apart by their length alone.
    if (name.length !== 10 || name.toLowerCase() !== 'connection') continue;
    if (value.length === 10 && value.toLowerCase() === 'keep-alive') continue;
    for (const token of value.split(',')) {
      const trimmed = token.trim().toLowerCase();
      if (trimmed) (listed ??= new Set()).add(trimmed);
    }
  }
  return listed ?? NONE_LISTED;
}

/**
 * The caller's headers the provider may see, followed by the injected ones. `injectedNames` are
 * lower-case; `explicit` holds the positions in `caller` of the headers it sent with the
 * `service-proxy-` prefix (the call's `explicit_headers`). Refuses (400 `invalid_headers`) a
 * header that is not valid HTTP, rather than let the HTTP client fail on it.
 */
export function upstreamHeaders(
  caller: ReadonlyArray<readonly [string, string]>,
  injected: ReadonlyArray<[string, string]>,
  injectedNames: ReadonlySet<string>,
  explicit?: ReadonlyArray<number>,
): Array<[string, string]> {
  const listed = connectionListed(caller);
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < caller.length; i++) {
    const header = caller[i]!;
    const name = header[0];
    const value = header[1];
    if (!TOKEN.test(name) || UNSAFE_VALUE.test(value)) throw new AppError('invalid_headers', 'A header to forward is not a valid HTTP header');
    const lower = name.toLowerCase();
    // The exception is looked for only among headers already dropped, and only in a call that
    // has prefixed ones: every other header costs what it did.
    if (NEVER_FORWARDED.has(lower) && !(explicit !== undefined && CALLER_CREDENTIALS.has(lower) && explicit.includes(i))) continue;
    if (listed.has(lower) || injectedNames.has(lower)) continue;
    if (NEVER_FORWARDED_PREFIXES.some((prefix) => lower.startsWith(prefix))) continue;
    headers.push([name, value]);
  }
  headers.push(...injected);
  return headers;
}

/**
 * Refuses (400 `invalid_headers`) credentials whose headers are not valid HTTP (filled from the
 * connection's configuration), once, as they come from the vault and before they are cached, so
 * no call checks them again. The value is never quoted: it may hold the credential.
 */
export function checkInjectedHeaders(headers: Readonly<Record<string, string>>): void {
  for (const name in headers) {
    if (!TOKEN.test(name) || UNSAFE_VALUE.test(headers[name]!)) throw new AppError('invalid_headers', "A header of the connection's credentials is not a valid HTTP header");
  }
}
