import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { ProxyCredentials } from '@latchkey/contracts';
import { percentEncode, signatureBaseString } from '@latchkey/oauth1';
import { proxyMetaFixture } from './meta-fixture.js';
import { buildCall } from './upstream-call.js';

const tba = (oauth1: Partial<NonNullable<ProxyCredentials['oauth1']>>): ProxyCredentials => ({
  id: 'c',
  provider: 'netsuite',
  auth_mode: 'TBA',
  expires_at: null,
  base_url: 'https://1234567-sb1.suitetalk.api.netsuite.com/services/rest',
  headers: {},
  query: {},
  decompress: false,
  oauth1: { consumer_key: 'ck', consumer_secret: 'cs&1', token: 'tk', token_secret: 'ts', ...oauth1 },
});

/** The Authorization header's parameters, unquoted and decoded. */
function authorizationParams(header: string): Record<string, string> {
  expect(header.startsWith('OAuth ')).toBe(true);
  return Object.fromEntries([...header.slice(6).matchAll(/([a-z_]+)="([^"]*)"/g)].map(([, name, value]) => [name!, decodeURIComponent(value!)]));
}

describe('buildCall', () => {
  it('signs a TBA call with the method and realm its provider asks for (NetSuite: HMAC-SHA256, its account id)', () => {
    const call = buildCall(proxyMetaFixture('record/v1/customer', { query: 'limit=5' }), tba({ signature_method: 'HMAC-SHA256', realm: '1234567_SB1' }), new Uint8Array(0));
    const url = 'https://1234567-sb1.suitetalk.api.netsuite.com/services/rest/record/v1/customer?limit=5';
    const [name, header] = call.sign!('GET', new URL(url));
    expect(name).toBe('Authorization');
    const { realm, oauth_signature: signature, ...oauthParams } = authorizationParams(header);
    expect(realm).toBe('1234567_SB1');
    expect(oauthParams).toMatchObject({ oauth_signature_method: 'HMAC-SHA256', oauth_consumer_key: 'ck', oauth_token: 'tk' });
    // The realm is not signed (RFC 5849, 3.4.1.3.1); the signature checks out with SHA-256.
    const base = signatureBaseString({ method: 'GET', url, oauthParams });
    const expected = createHmac('sha256', `${percentEncode('cs&1')}&${percentEncode('ts')}`).update(base).digest('base64');
    expect(signature).toBe(expected);
  });

  it('sends only the signed Authorization when the caller prefixes one of its own', () => {
    const meta = proxyMetaFixture('items', { headers: [['Authorization', 'Bearer attacker']], explicit_headers: [0] });
    const call = buildCall(meta, tba({}), new Uint8Array(0));
    expect(call.headers).toEqual([]);
    expect(call.sign!('GET', new URL('https://api.example.com/items'))[0]).toBe('Authorization');
  });

  it("keeps a prefixed Authorization and Cookie to the provider's origin, as it keeps injected credentials", () => {
    const apiKey: ProxyCredentials = { id: 'c', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: 'https://api.example.com', headers: { 'X-Api-Key': 'k' }, query: {}, decompress: false };
    const meta = proxyMetaFixture('items', { headers: [['authorization', 'Bearer caller'], ['Cookie', 'session=caller'], ['X-Trace', 'abc']], explicit_headers: [0, 1] });
    const call = buildCall(meta, apiKey, new Uint8Array(0));
    expect(call.headers).toEqual([['authorization', 'Bearer caller'], ['Cookie', 'session=caller'], ['X-Trace', 'abc'], ['X-Api-Key', 'k']]);
    // Dropped on a redirect to another origin, as curl and fetch drop them.
    expect([...call.secretHeaders].sort()).toEqual(['authorization', 'cookie', 'x-api-key']);
  });

  it('signs with HMAC-SHA1 and no realm when the credentials name neither (as OAuth 1.0a providers want)', () => {
    const call = buildCall(proxyMetaFixture('items'), tba({}), new Uint8Array(0));
    const params = authorizationParams(call.sign!('GET', new URL('https://api.example.com/items'))[1]);
    expect(params['oauth_signature_method']).toBe('HMAC-SHA1');
    expect(params['realm']).toBeUndefined();
  });
});
