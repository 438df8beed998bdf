import { describe, expect, it } from '@jest/globals';
import { checkHostValue, checkHostValues, fillProviderUrl, hostBearingKeys } from './provider-url.js';

const SUBDOMAIN = { subdomain: { pattern: '^[A-Za-z0-9-]+$' } };
const HOST = { host: { pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?$' } };
const codeOf = (run: () => unknown) => {
  try {
    run();
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

describe('provider URLs', () => {
  it('finds the keys a template puts in its host', () => {
    expect(hostBearingKeys('https://${connectionConfig.subdomain}.okta.com/oauth2/${connectionConfig.server}/v1/token')).toEqual(['subdomain']);
    expect(hostBearingKeys('https://${connectionConfig.host}/token')).toEqual(['host']);
    expect(hostBearingKeys('https://example.com/${connectionConfig.tenant}/token')).toEqual([]);
  });

  it('fills a host label that matches the pattern, and encodes values elsewhere', () => {
    expect(fillProviderUrl('https://${connectionConfig.subdomain}.okta.com/t/${connectionConfig.tenant}', { subdomain: 'acme', tenant: 'a/b' }, SUBDOMAIN)).toBe(
      'https://acme.okta.com/t/a%2Fb',
    );
    expect(fillProviderUrl('https://${connectionConfig.host}/oauth/token', { host: 'auth.example.com/prefix' }, HOST)).toBe('https://auth.example.com/prefix/oauth/token');
  });

  it.each([
    ['evil.example/x?', SUBDOMAIN],
    ['127.0.0.1:4701', SUBDOMAIN],
    ['evil.example#', SUBDOMAIN],
    ['a@evil.example', undefined],
    ['evil.example', undefined],
    ['evil%2eexample', undefined],
    ['', undefined],
  ])('case 3: refuses the host-bearing value %j', (value, fields) => {
    expect(codeOf(() => fillProviderUrl('https://${connectionConfig.subdomain}.example.com/oauth/token', { subdomain: value }, fields))).toBe('invalid_body');
  });

  it('refuses characters that move the host even where a pattern would allow them', () => {
    expect(codeOf(() => checkHostValue('host', 'evil.example@good.example', { host: { pattern: '.*' } }))).toBe('invalid_body');
    expect(codeOf(() => checkHostValue('host', 'evil.example\\good', { host: { pattern: '.*' } }))).toBe('invalid_body');
  });

  it('keeps the fixed suffix of the template host', () => {
    expect(codeOf(() => fillProviderUrl('https://${connectionConfig.subdomain}.example.com/t', { subdomain: 'evil.com:1' }, { subdomain: { pattern: '.*' } }))).toBe('invalid_body');
  });

  it("checks a connection's config, when it is given, against every URL it will fill: the proxy's base URL and a token request's too", () => {
    const proxied = { proxy: { base_url: 'https://${connectionConfig.subdomain}.atlassian.net/rest/${connectionConfig.version}' } };
    // A whole host pasted where one label goes would fail every call.
    const error = (() => {
      try {
        checkHostValues(proxied, { subdomain: 'canary.atlassian.net', version: '3' });
      } catch (thrown) {
        return thrown as { code?: string; message: string; details?: unknown };
      }
      return undefined;
    })();
    expect(error?.code).toBe('invalid_body');
    expect(error?.message).toContain('connection_config.subdomain');
    expect(JSON.stringify(error)).not.toContain('canary');
    expect(codeOf(() => checkHostValues(proxied, { subdomain: 'acme', version: 'a/b' }))).toBeUndefined();
    // Where the base URL's host is the value, a host name and port are what it takes.
    expect(codeOf(() => checkHostValues({ proxy: { base_url: 'https://${connectionConfig.host}/api' } }, { host: 'jira.acme.test:8443' }))).toBeUndefined();
    expect(codeOf(() => checkHostValues({ proxy: { base_url: 'https://${connectionConfig.host}/api' } }, { host: 'evil.test/x?' }))).toBe('invalid_body');
    // A token request's host takes what each refresh will check: a DNS label, or the field's pattern.
    const bought = { token_request: { url: 'https://${connectionConfig.host}/api/login' } };
    expect(codeOf(() => checkHostValues(bought, { host: 'api.acme.test' }))).toBe('invalid_body');
    expect(codeOf(() => checkHostValues({ ...bought, connection_config: HOST }, { host: 'api.acme.test' }))).toBeUndefined();
  });

  it('names the field, never the value, when it refuses', () => {
    try {
      fillProviderUrl('https://${connectionConfig.subdomain}.example.com/t', { subdomain: 'canary-evil.example/x?' }, SUBDOMAIN);
    } catch (error) {
      expect((error as Error).message).toContain('connection_config.subdomain');
      expect((error as Error).message).not.toContain('canary');
    }
  });
});
