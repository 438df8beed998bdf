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
});
