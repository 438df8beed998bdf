import { describe, expect, it } from '@jest/globals';
import { providerSchema } from '../catalog/provider-schema.js';
import type { StoredCredentials } from './connection-credentials.js';
import { injectionFor } from './credential-injection.js';

/** A provider whose proxy places fields of the credentials itself, in a header, the query and the host. */
const placing = (authMode: 'TWO_STEP' | 'CUSTOM' | 'BILL') =>
  providerSchema.parse({
    display_name: 'Placing',
    categories: ['test'],
    auth_mode: authMode,
    ...(authMode === 'CUSTOM' ? {} : { token_request: { url: 'https://login.placing.test/session', body: { user: '${credentials.user}' }, token_path: 'token', expires_in_seconds: 600 } }),
    proxy: {
      base_url: 'https://${credentials.region}.placing.test/api',
      headers: { 'X-User': '${credentials.user}' },
      query: { account: '${credentials.account}' },
    },
  });

describe('injectionFor', () => {
  it("fills `${credentials.FIELD}` from a TWO_STEP or CUSTOM connection's raw fields, as the token request does", () => {
    const raw = { user: 'ada', account: 'acc-7', region: 'eu' };
    for (const credentials of [
      { type: 'TWO_STEP', raw, token: 'bought' },
      { type: 'CUSTOM', raw },
    ] as StoredCredentials[]) {
      const injection = injectionFor(placing(credentials.type as 'TWO_STEP' | 'CUSTOM'), {}, {}, credentials);
      expect({ type: credentials.type, base_url: injection.base_url, header: injection.headers['X-User'], query: injection.query }).toEqual({
        type: credentials.type,
        base_url: 'https://eu.placing.test/api',
        header: 'ada',
        query: { account: 'acc-7' },
      });
    }
  });

  it("reads the credentials' own fields first, and never a BILL connection's raw (the provider's last answer)", () => {
    const twoStep = injectionFor(placing('TWO_STEP'), {}, {}, { type: 'TWO_STEP', raw: { user: 'from-raw', account: 'a', region: 'eu', type: 'BILL' }, token: 't', user: 'own' } as StoredCredentials);
    expect(twoStep.headers['X-User']).toBe('own');
    const bill = { type: 'BILL', username: 'ada', password: 'p', organization_id: 'o', dev_key: 'd', session_id: 's', raw: { user: 'from-answer', account: 'a', region: 'eu' } };
    expect(() => injectionFor(placing('BILL'), {}, {}, bill as StoredCredentials)).toThrow();
  });

  it('signs TBA calls with HMAC-SHA256 unless the provider says otherwise, with the realm its entry builds from the connection config', () => {
    const tbaProvider = (proxy: Record<string, unknown>) =>
      providerSchema.parse({ display_name: 'NetSuite', categories: ['erp'], auth_mode: 'TBA', connection_configuration: ['account_id'], proxy: { base_url: 'https://api.netsuite.test', ...proxy } });
    const credentials = { type: 'TBA', token_id: 'tk', token_secret: 'ts' } as StoredCredentials;
    const signed = injectionFor(tbaProvider({ realm: '${connectionConfig.account_id}' }), { client_id: 'ck', client_secret: 'cs' }, { account_id: '1234567_SB1' }, credentials);
    expect(signed.oauth1).toEqual({ consumer_key: 'ck', consumer_secret: 'cs', token: 'tk', token_secret: 'ts', signature_method: 'HMAC-SHA256', realm: '1234567_SB1' });
    expect(injectionFor(tbaProvider({ signature_method: 'HMAC-SHA1' }), {}, {}, credentials).oauth1).toMatchObject({ signature_method: 'HMAC-SHA1' });
    // A realm that would end the header's quoted string is refused, not sent.
    expect(() => injectionFor(tbaProvider({ realm: '${connectionConfig.account_id}' }), {}, { account_id: '1", oauth_token="x' }, credentials)).toThrow(
      expect.objectContaining({ code: 'invalid_headers' }),
    );
  });

  it('takes a signature method and realm from OAUTH1 and TBA providers only, and a realm of connection config only', () => {
    const issues = (input: Record<string, unknown>) => {
      const result = providerSchema.safeParse({ display_name: 'P', categories: ['x'], connection_configuration: ['account_id'], ...input });
      return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    };
    expect(issues({ auth_mode: 'API_KEY', proxy: { base_url: 'https://p.test', headers: { 'X-Key': '${apiKey}' }, signature_method: 'HMAC-SHA256' } })).toEqual([
      'proxy.signature_method: applies to auth_mode OAUTH1 and TBA, not API_KEY',
    ]);
    expect(issues({ auth_mode: 'TBA', proxy: { base_url: 'https://p.test', realm: '${credentials.token_id}' } })).toEqual(['proxy.realm: may use ${connectionConfig.KEY} placeholders only']);
    expect(issues({ auth_mode: 'TBA', proxy: { base_url: 'https://p.test', realm: '${connectionConfig.region}' } })).toEqual([
      'proxy.realm: uses ${connectionConfig.region} but connection_configuration does not list "region"',
    ]);
  });
});
