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
