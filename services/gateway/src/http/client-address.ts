import type { IncomingMessage } from 'node:http';

/**
 * The address a request comes from, for per-client limits. The socket's peer, unless the
 * operator says `trustedProxyHops` proxies stand in front (TRUSTED_PROXY_HOPS): then the
 * address the outermost trusted proxy appended to `X-Forwarded-For`. Entries to the left of it
 * were written by the client and are never believed, and by default the header is ignored.
 */
export function clientAddress(req: IncomingMessage, trustedProxyHops: number): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  if (trustedProxyHops === 0) return peer;
  const header = req.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((hop) => hop.trim())
    .filter((hop) => hop !== '');
  return hops[hops.length - trustedProxyHops] ?? hops[0] ?? peer;
}

/**
 * The unit a per-client limit counts: an IPv4 address, or the /64 an IPv6 address belongs to
 * (one subscriber's network, where an attacker can pick any of 2^64 addresses).
 */
export function clientBucket(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.split('%')[0]!.toLowerCase().split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((group) => group.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
