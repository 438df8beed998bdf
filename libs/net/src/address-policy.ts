import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { createCache } from '@latchkey/cache';

/**
 * Which IP addresses outbound calls may connect to: the proxy's upstreams, the vault's token
 * endpoints, the webhook router's customer URLs (ARCHITECTURE.md, Security model): only
 * globally routable unicast, so a caller cannot aim the proxy, and the credentials it injects, at
 * our own network or a cloud metadata service. An operator may open CIDRs (`PROXY_ALLOW_CIDRS`),
 * for example for an upstream on a private network.
 *
 * Default deny: IPv4 must fall in no special-purpose range of ipaddr.js (loopback, private,
 * link-local, CGNAT, multicast, unspecified, broadcast, reserved, benchmarking, AS112, AMT);
 * IPv6 must be global unicast (2000::/3) outside every special-purpose range. IPv6 forms that
 * carry an IPv4 address are judged by that IPv4 address, since that is where traffic may end up:
 * IPv4-mapped (::ffff:0:0/96) and IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96),
 * 6to4 (2002::/16) and Teredo (2001::/32, both the server and the client address). Local-use
 * NAT64 (64:ff9b:1::/48) is refused outright: where the IPv4 address sits depends on the network.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Address, number];

/**
 * What a refusal tells its reader to do about it: an operator decides which private ranges are
 * reachable (a local test server, an on-premises provider).
 */
export const ALLOW_CIDRS_HINT = 'an operator can allow a range with PROXY_ALLOW_CIDRS (for example 127.0.0.1/32 for a test server on this machine)';

export type AddressVerdict = { allowed: true } | { allowed: false; reason: string };

export interface AddressPolicy {
  /** Judges one IP address literal (no brackets, no port). A hostname is refused. */
  check(address: string): AddressVerdict;
}

export interface AddressPolicyOptions {
  /** CIDRs whose addresses are allowed whatever their range, cloud metadata included. */
  allowCidrs: readonly string[];
}

/**
 * Metadata services that hand out instance credentials. All sit in ranges refused anyway except
 * Azure's WireServer, which looks public; naming them gives a clearer reason.
 */
const CLOUD_METADATA: ReadonlyMap<string, string> = new Map([
  ['169.254.169.254', 'AWS, GCP, Azure, OpenStack, Oracle'],
  ['fd00:ec2::254', 'AWS IPv6'],
  ['100.100.100.200', 'Alibaba Cloud'],
  ['168.63.129.16', 'Azure WireServer'],
]);

const RANGE_REASONS: Readonly<Record<string, string>> = {
  unspecified: 'unspecified address',
  broadcast: 'broadcast address',
  multicast: 'multicast range',
  linkLocal: 'link-local range',
  loopback: 'loopback range',
  carrierGradeNat: 'carrier-grade NAT range',
  private: 'private range',
  reserved: 'reserved range',
  uniqueLocal: 'unique-local range',
  deprecatedSiteLocal: 'site-local range',
  benchmarking: 'benchmarking range',
};

const GLOBAL_UNICAST_V6: Cidr = ipaddr.parseCIDR('2000::/3');
const ALLOWED: AddressVerdict = { allowed: true };

function refused(reason: string): AddressVerdict {
  return { allowed: false, reason };
}

function v4(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** The IPv4 addresses an IPv6 address carries, with the name of the form; undefined if none. */
function embeddedIPv4(address: ipaddr.IPv6): { form: string; addresses: ipaddr.IPv4[] } | undefined {
  const p = address.parts;
  const part = (i: number): number => p[i] ?? 0;
  switch (address.range()) {
    case 'ipv4Mapped':
      return { form: 'IPv4-mapped', addresses: [v4(part(6), part(7))] };
    case 'rfc6145':
      return { form: 'IPv4-translated', addresses: [v4(part(6), part(7))] };
    case 'rfc6052':
      // 64:ff9b::/96 puts the IPv4 address last; local-use 64:ff9b:1::/48 is left undefined.
      return part(2) === 0 ? { form: 'NAT64', addresses: [v4(part(6), part(7))] } : undefined;
    case '6to4':
      return { form: '6to4', addresses: [v4(part(1), part(2))] };
    case 'teredo':
      // RFC 4380: the server's address as is, the client's with every bit inverted.
      return { form: 'Teredo', addresses: [v4(part(2), part(3)), v4(part(6) ^ 0xffff, part(7) ^ 0xffff)] };
    default:
      return undefined;
  }
}

function parseCidr(entry: string): Cidr | undefined {
  // Four-part decimal only: ipaddr.js would also read `0x7f.1/8` or `2130706433/8`, which an
  // operator almost certainly did not mean. Zone ids have no place in a CIDR.
  const valid = entry.includes(':')
    ? !entry.includes('%') && ipaddr.IPv6.isValidCIDR(entry)
    : ipaddr.IPv4.isValidCIDRFourPartDecimal(entry);
  return valid ? ipaddr.parseCIDR(entry) : undefined;
}

function parseCidrs(entries: readonly string[]): Cidr[] {
  const cidrs: Cidr[] = [];
  const bad: string[] = [];
  for (const entry of entries) {
    const cidr = parseCidr(entry);
    if (cidr) cidrs.push(cidr);
    else bad.push(JSON.stringify(entry));
  }
  if (bad.length > 0) {
    throw new Error(`Invalid CIDR ${bad.join(', ')}: expected address/prefix, such as 10.0.0.0/8 or fd00::/8`);
  }
  return cidrs;
}

/**
 * Reads a comma-separated CIDR list such as `PROXY_ALLOW_CIDRS`; blanks around and between
 * entries are ignored, so an empty text is an empty list. Throws one error naming every bad entry.
 */
export function parseCidrList(text: string): string[] {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  parseCidrs(entries);
  return entries;
}

const VERDICT_CACHE_SIZE = 4096;

/** Throws on a bad CIDR, naming it, so a misconfigured proxy fails at start. */
export function createAddressPolicy(options: AddressPolicyOptions): AddressPolicy {
  const allowCidrs = parseCidrs(options.allowCidrs);
  const inAllowList = (address: Address): boolean =>
    allowCidrs.some((cidr) => cidr[0].kind() === address.kind() && address.match(cidr));

  function judge(address: Address): AddressVerdict {
    if (inAllowList(address)) return ALLOWED;
    const metadata = CLOUD_METADATA.get(address.toString());
    if (metadata !== undefined) return refused(`cloud metadata address (${metadata})`);

    if (address instanceof ipaddr.IPv4) {
      const range = address.range();
      return range === 'unicast' ? ALLOWED : refused(RANGE_REASONS[range] ?? `special-purpose range (${range})`);
    }

    const embedded = embeddedIPv4(address);
    if (embedded) {
      for (const inner of embedded.addresses) {
        const verdict = judge(inner);
        if (!verdict.allowed) return refused(`${embedded.form} address of ${inner.toString()}: ${verdict.reason}`);
      }
      return ALLOWED;
    }
    const range = address.range();
    if (range !== 'unicast') return refused(RANGE_REASONS[range] ?? `special-purpose range (${range})`);
    // ipaddr.js calls anything unlisted unicast, the deprecated IPv4-compatible ::a.b.c.d included.
    if (!address.match(GLOBAL_UNICAST_V6)) return refused('outside global unicast (2000::/3)');
    return ALLOWED;
  }

  // The policy never changes, so verdicts are remembered (never stale, only bounded): a busy
  // replica calls a few hosts.
  const verdicts = createCache<AddressVerdict>({ maxEntries: VERDICT_CACHE_SIZE });
  return {
    check(text) {
      const known = verdicts.get(text);
      if (known) return known;
      // node:net's parser is the one sockets use; it rejects the shorthand IPv4 forms that
      // ipaddr.js would accept, so what is judged is exactly what would be connected to.
      const verdict = isIP(text) === 0 ? refused('not an IP address') : judge(ipaddr.parse(text));
      verdicts.set(text, verdict);
      return verdict;
    },
  };
}
