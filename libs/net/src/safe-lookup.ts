import dns, { type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { AddressPolicy } from './address-policy.js';

/**
 * Enforces the address policy at connection time. A check before the request and a second DNS
 * lookup by the socket would leave a gap (DNS rebinding: the name answers a public address to
 * the check and 127.0.0.1 to the socket), so the lookup the socket uses is the check.
 *
 * Callers must do both, on the first request and again on every redirect hop:
 *   checkUrlHost(url, policy);                                // IP literals: node skips `lookup`
 *   request(url, { lookup: createSafeLookup(policy) });        // names: checked as resolved
 * (`lookup` may also be given once to an `http.Agent`/`https.Agent`; it reaches every socket.)
 * Anything that connects elsewhere than `url`'s host (an outbound HTTP proxy, a `host` option
 * differing from the URL) bypasses this and must not be used.
 */

/** `dns.lookup` with `{ all: true }`; the default resolver, replaceable for tests. */
export type ResolveAll = (
  hostname: string,
  options: LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * The upstream resolved to, or is, an address the policy refuses. Its message names the host,
 * the address and the range, never a URL (whose path or query may carry secrets). `code` is the
 * error-table code the proxy replies with.
 */
export class UpstreamNotAllowedError extends Error {
  override readonly name = 'UpstreamNotAllowedError';
  readonly code = 'upstream_not_allowed';
  readonly address: string;
  readonly reason: string;
  readonly hostname: string;

  constructor(input: { hostname: string; address: string; reason: string }) {
    const via = input.hostname === input.address ? '' : ` (resolved from ${input.hostname})`;
    super(`Upstream address ${input.address}${via} is not allowed: ${input.reason}`);
    this.address = input.address;
    this.reason = input.reason;
    this.hostname = input.hostname;
  }
}

function withoutBrackets(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/**
 * Throws UpstreamNotAllowedError when the URL's host is an IP literal the policy refuses. Names
 * pass: the safe lookup judges what they resolve to. The WHATWG parser has already rewritten
 * shorthand IPv4 hosts (`http://2130706433/`) to dotted form, so they are caught here too.
 */
export function checkUrlHost(url: string | URL, policy: Pick<AddressPolicy, 'check'>): void {
  const host = withoutBrackets((typeof url === 'string' ? new URL(url) : url).hostname);
  if (isIP(host) === 0) return;
  const verdict = policy.check(host);
  if (!verdict.allowed) throw new UpstreamNotAllowedError({ hostname: host, address: host, reason: verdict.reason });
}

function notFound(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
}

/**
 * A `lookup` for node:net, node:http and node:https (and got's `dnsLookup`): resolves every
 * address of the name, refuses the connection with UpstreamNotAllowedError if the policy refuses
 * any of them (a name that answers one private address is not trusted with the others), and
 * hands the socket the very addresses it checked: one with `all: false`, all of them with
 * `all: true` (which node asks for when it races address families).
 */
export function createSafeLookup(policy: Pick<AddressPolicy, 'check'>, resolve: ResolveAll = dns.lookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      // On error node reads only the error; the empty address satisfies the callback's type.
      if (error) return callback(error, '');
      const first = addresses[0];
      if (first === undefined) return callback(notFound(hostname), '');
      for (const { address } of addresses) {
        const verdict = policy.check(address);
        if (!verdict.allowed) return callback(new UpstreamNotAllowedError({ hostname, address, reason: verdict.reason }), '');
      }
      if (options.all === true) return callback(null, addresses);
      return callback(null, first.address, first.family);
    });
  };
}
