import { describe, expect, it } from '@jest/globals';
import type { IncomingMessage } from 'node:http';
import { clientAddress } from './client-address.js';

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
});
