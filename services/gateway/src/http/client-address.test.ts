import { describe, expect, it } from '@jest/globals';
import type { IncomingMessage } from 'node:http';
import { clientAddress, clientBucket } from './client-address.js';

const request = (forwardedFor?: string) =>
  ({ socket: { remoteAddress: '10.0.0.9' }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } }) as unknown as IncomingMessage;

describe('client address', () => {
  it('is the socket peer by default, whatever X-Forwarded-For says', () => {
    expect(clientAddress(request('203.0.113.7'), 0)).toBe('10.0.0.9');
  });
  it('behind trusted proxies, is the address the outermost trusted proxy appended', () => {
    // The client wrote "1.1.1.1"; the one trusted proxy appended the real peer.
    expect(clientAddress(request('1.1.1.1, 203.0.113.7'), 1)).toBe('203.0.113.7');
    expect(clientAddress(request('1.1.1.1, 203.0.113.7, 10.0.0.2'), 2)).toBe('203.0.113.7');
    expect(clientAddress(request(), 1)).toBe('10.0.0.9');
  });
  it('counts IPv4 addresses one by one and IPv6 addresses by their /64', () => {
    expect(clientBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(clientBucket('2001:0db8:0001:0002:ffff:1:2:3')).toBe('2001:db8:1:2::/64');
    expect(clientBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientBucket('::1')).toBe('0:0:0:0::/64');
    expect(clientBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});
