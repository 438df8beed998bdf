import { describe, expect, it } from '@jest/globals';
import { checkInjectedHeaders, connectionListed, upstreamHeaders } from './header-policy.js';

describe('upstreamHeaders', () => {
  it('drops hop-by-hop, Connection-listed, Host, Cookie, forwarding and client-address headers, Proxy-* and the caller Authorization', () => {
    const caller: Array<[string, string]> = [
      ['Host', 'evil.example'],
      ['Cookie', 'session=1'],
      ['X-Forwarded-For', '10.0.0.1'],
      ['x-forwarded-host', 'evil.example'],
      ['Forwarded', 'for=10.0.0.1'],
      ['True-Client-IP', '10.0.0.1'],
      ['CF-Connecting-IP', '10.0.0.1'],
      ['X-Client-IP', '10.0.0.1'],
      ['X-Originating-IP', '10.0.0.1'],
      ['X-Cluster-Client-IP', '10.0.0.1'],
      ['Proxy-Authorization', 'Basic x'],
      ['Proxy-Foo', '1'],
      ['Connection', 'close, X-Hidden'],
      ['X-Hidden', 'secret'],
      ['Keep-Alive', 'timeout=5'],
      ['TE', 'trailers'],
      ['Authorization', 'Bearer attacker'],
      ['Accept', 'application/json'],
      ['X-Trace', 'abc'],
    ];
    expect(upstreamHeaders(caller, [['X-Api-Key', 'k']], new Set(['x-api-key']))).toEqual([
      ['Accept', 'application/json'],
      ['X-Trace', 'abc'],
      ['X-Api-Key', 'k'],
    ]);
  });

  it('never lets a caller header override an injected one, whatever its case', () => {
    const headers = upstreamHeaders([['x-API-key', 'attacker'], ['X-Api-Key', 'attacker']], [['X-Api-Key', 'k']], new Set(['x-api-key']));
    expect(headers).toEqual([['X-Api-Key', 'k']]);
  });

  it("passes on a prefixed Authorization and Cookie, and still drops the unprefixed ones (the caller's key to Latchkey)", () => {
    const caller: Array<[string, string]> = [
      ['Authorization', 'Bearer latchkey-key'],
      ['Authorization', 'Bearer caller-token'],
      ['Cookie', 'plain=1'],
      ['cookie', 'session=caller'],
      ['Accept', 'application/json'],
    ];
    expect(upstreamHeaders(caller, [['X-Api-Key', 'k']], new Set(['x-api-key']), [1, 3])).toEqual([
      ['Authorization', 'Bearer caller-token'],
      ['cookie', 'session=caller'],
      ['Accept', 'application/json'],
      ['X-Api-Key', 'k'],
    ]);
    // A call that names no prefixed header (as an older gateway's) keeps the old rule.
    expect(upstreamHeaders(caller, [], new Set())).toEqual([['Accept', 'application/json']]);
  });

  it('never lets a prefixed header add to or replace an injected Authorization, whatever its case and however often sent', () => {
    const caller: Array<[string, string]> = [
      ['Authorization', 'Bearer attacker'],
      ['AUTHORIZATION', 'Bearer attacker'],
      ['authorization', 'Bearer attacker'],
      ['Cookie', 'session=caller'],
    ];
    expect(upstreamHeaders(caller, [['Authorization', 'Bearer ours']], new Set(['authorization']), [0, 1, 2, 3])).toEqual([
      ['Cookie', 'session=caller'],
      ['Authorization', 'Bearer ours'],
    ]);
    expect(upstreamHeaders(caller, [['cookie', 'ours=1']], new Set(['cookie']), [0, 3])).toEqual([
      ['Authorization', 'Bearer attacker'],
      ['cookie', 'ours=1'],
    ]);
  });

  it('drops prefixed transport, forwarding and client-address headers as it drops unprefixed ones', () => {
    const caller: Array<[string, string]> = [
      ['Host', 'evil.example'],
      ['Transfer-Encoding', 'chunked'],
      ['Content-Length', '5'],
      ['Connection', 'X-Hidden'],
      ['X-Hidden', 'secret'],
      ['TE', 'trailers'],
      ['Proxy-Authorization', 'Basic x'],
      ['Proxy-Connection', 'keep-alive'],
      ['X-Forwarded-For', '10.0.0.1'],
      ['Forwarded', 'for=10.0.0.1'],
      ['Via', '1.1 evil'],
      ['X-Real-IP', '10.0.0.1'],
      ['X-Trace', 'abc'],
    ];
    expect(upstreamHeaders(caller, [], new Set(), caller.map((_, i) => i))).toEqual([['X-Trace', 'abc']]);
  });

  it('refuses a header that is not valid HTTP', () => {
    expect(() => upstreamHeaders([['X-A', 'a\r\nHost: evil']], [], new Set())).toThrow(expect.objectContaining({ code: 'invalid_headers' }));
    expect(() => upstreamHeaders([['X A', 'a']], [], new Set())).toThrow(expect.objectContaining({ code: 'invalid_headers' }));
  });
});

describe('checkInjectedHeaders', () => {
  it('refuses credentials whose headers are not valid HTTP, without quoting the value', () => {
    expect(() => checkInjectedHeaders({ Authorization: 'Bearer token', 'X-Api-Key': 'k' })).not.toThrow();
    for (const headers of [{ 'X-Api-Key': 'secret-\u65e5\u672c' }, { 'X-Api-Key': 'secret\r\nHost: evil' }, { 'X Api': 'k' }]) {
      expect(() => checkInjectedHeaders(headers)).toThrow(expect.objectContaining({ code: 'invalid_headers' }));
      expect(() => checkInjectedHeaders(headers)).toThrow(expect.not.objectContaining({ message: expect.stringContaining('secret') }));
    }
  });
});

describe('connectionListed', () => {
  it('reads every Connection header, whatever its letter case, and nothing else', () => {
    const headers: Array<[string, string]> = [
      ['CONNECTION', 'X-One, keep-alive'],
      ['connection', ' x-two '],
      ['Connectio', 'x-not'],
      ['Connections', 'x-not-either'],
      ['X-Connectn', 'x-nor'],
    ];
    expect(connectionListed(headers)).toEqual(new Set(['x-one', 'keep-alive', 'x-two']));
  });

  it('lists nothing for none, or for keep-alive alone, which is dropped as hop-by-hop anyway', () => {
    expect(connectionListed([['Host', 'example.com']]).size).toBe(0);
    expect(connectionListed([['Connection', 'Keep-Alive']]).size).toBe(0);
    expect(connectionListed([['Connection', 'close']])).toEqual(new Set(['close']));
    expect(upstreamHeaders([['Connection', 'keep-alive'], ['Keep-Alive', 'timeout=5'], ['X-Kept', 'yes']], [], new Set())).toEqual([['X-Kept', 'yes']]);
  });
});
