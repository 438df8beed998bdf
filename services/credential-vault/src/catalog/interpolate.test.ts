import { describe, expect, it } from '@jest/globals';
import { credentialFieldsOf, interpolate, interpolateUrl, placeholdersOf, unknownPlaceholdersOf, usesCredentials } from './interpolate.js';

describe('interpolate', () => {
  it('fills every kind of placeholder', () => {
    const context = {
      connectionConfig: { subdomain: 'acme', port: 8443, sandbox: false },
      credentials: { app_key: 'app-123' },
      apiKey: 'key-1',
      username: 'ada',
      password: 'secret',
      accessToken: 'tok',
    };
    expect(interpolate('https://${connectionConfig.subdomain}.example.com:${connectionConfig.port}/${connectionConfig.sandbox}', context)).toBe(
      'https://acme.example.com:8443/false',
    );
    expect(interpolate('Bearer ${apiKey}', context)).toBe('Bearer key-1');
    expect(interpolate('${credentials.app_key}|${username}:${password}|${accessToken}', context)).toBe('app-123|ada:secret|tok');
  });

  it('leaves text without placeholders alone, including a lone $', () => {
    expect(interpolate('price: $5 {not a placeholder}', {})).toBe('price: $5 {not a placeholder}');
  });

  it('inserts an empty string as it is', () => {
    expect(interpolate('x${connectionConfig.suffix}', { connectionConfig: { suffix: '' } })).toBe('x');
  });

  it('throws naming the placeholder whose value is missing', () => {
    expect(() => interpolate('https://${connectionConfig.subdomain}.zendesk.com', { connectionConfig: {} })).toThrow(
      'missing value for ${connectionConfig.subdomain}',
    );
    expect(() => interpolate('https://${connectionConfig.subdomain}.zendesk.com', {})).toThrow('${connectionConfig.subdomain}');
    expect(() => interpolate('Bearer ${apiKey}', {})).toThrow('missing value for ${apiKey}');
    expect(() => interpolate('${credentials.app_key}', { credentials: { app_key: null } })).toThrow('missing value for ${credentials.app_key}');
  });

  it('refuses unknown placeholders and non-scalar values', () => {
    expect(() => interpolate('Bearer ${apikey}', { apiKey: 'k' })).toThrow('unknown placeholder ${apikey}');
    expect(() => interpolate('${connectionConfig.a}', { connectionConfig: { a: { nested: 1 } } })).toThrow(
      'value for ${connectionConfig.a} must be a string, number or boolean',
    );
  });
});

describe('placeholdersOf', () => {
  it('lists the connection config keys used, once each, in order', () => {
    expect(placeholdersOf('https://${connectionConfig.region}.${connectionConfig.host}/${connectionConfig.region}/${apiKey}')).toEqual([
      'region',
      'host',
    ]);
    expect(placeholdersOf('https://api.github.com')).toEqual([]);
  });
});

describe('template checks used by the catalog schema', () => {
  it('finds credential fields, unknown placeholders and whether a credential is placed', () => {
    expect(credentialFieldsOf('${credentials.app_key} ${credentials.app_key} ${apiKey}')).toEqual(['app_key']);
    expect(unknownPlaceholdersOf('${apiKey} ${connectionConfig.} ${token} ${}')).toEqual(['${connectionConfig.}', '${token}', '${}']);
    expect(usesCredentials('Token token=${apiKey}')).toBe(true);
    expect(usesCredentials('${credentials.secret}')).toBe(true);
    expect(usesCredentials('https://${connectionConfig.subdomain}.example.com')).toBe(false);
  });
});

describe('interpolateUrl', () => {
  const config = (connectionConfig: Record<string, unknown>) => ({ connectionConfig });

  it('fills each place of a URL with a value fit for it', () => {
    expect(interpolateUrl('https://${connectionConfig.subdomain}.zendesk.com/api', config({ subdomain: 'acme-1' }))).toBe('https://acme-1.zendesk.com/api');
    expect(interpolateUrl('https://api.${connectionConfig.site}', config({ site: 'us3.datadoghq.com' }))).toBe('https://api.us3.datadoghq.com');
    expect(interpolateUrl('https://${connectionConfig.host}/oauth/token', config({ host: 'sso.example.com:8443' }))).toBe('https://sso.example.com:8443/oauth/token');
    expect(interpolateUrl('https://x.example.com:${connectionConfig.port}/a', config({ port: 8443 }))).toBe('https://x.example.com:8443/a');
    expect(interpolateUrl('https://api.telegram.org/bot${apiKey}', { apiKey: '123:AB-c' })).toBe('https://api.telegram.org/bot123:AB-c');
    expect(interpolateUrl('https://x.example.com/stores/${connectionConfig.id}?q=${connectionConfig.q}', config({ id: 'a b/c?d#e%', q: 'x&y=z#' }))).toBe(
      'https://x.example.com/stores/a%20b%2Fc%3Fd%23e%25?q=x%26y%3Dz%23',
    );
  });

  it('refuses a value that would change the host, and names the placeholder only', () => {
    const attacks = ['127.0.0.1:4701/x?', 'evil.example/', 'a@evil.example', 'evil.example#', 'a.b', '', 'a\\b', '-a'];
    for (const subdomain of attacks) {
      expect(() => interpolateUrl('https://${connectionConfig.subdomain}.zendesk.com/api', config({ subdomain }))).toThrow('${connectionConfig.subdomain}');
    }
    for (const host of ['evil.example/x?', 'evil.example:1:2', 'user@evil.example', 'evil.example:99999', '[::1]']) {
      expect(() => interpolateUrl('https://${connectionConfig.host}/api', config({ host }))).toThrow('must be a host name');
    }
    expect(() => interpolateUrl('https://api.${connectionConfig.site}', config({ site: 'evil.example/x' }))).toThrow('must be a DNS name');
    expect(() => interpolateUrl('https://x.example.com:${connectionConfig.port}', config({ port: '1@evil' }))).toThrow('port');
    try {
      interpolateUrl('https://${connectionConfig.subdomain}.zendesk.com', config({ subdomain: 'canary-7f3a/x?' }));
    } catch (error) {
      expect((error as Error).message).not.toContain('canary-7f3a');
    }
  });

  it('refuses dot segments in the path and placeholders in the scheme', () => {
    for (const id of ['..', '.', '']) {
      expect(() => interpolateUrl('https://x.example.com/stores/${connectionConfig.id}/items', config({ id }))).toThrow('${connectionConfig.id}');
    }
    expect(interpolateUrl('https://x.example.com/stores/${connectionConfig.id}', config({ id: '../..' }))).toBe('https://x.example.com/stores/..%2F..');
    expect(() => interpolateUrl('${connectionConfig.scheme}://x.example.com', config({ scheme: 'https' }))).toThrow('scheme');
  });
});
