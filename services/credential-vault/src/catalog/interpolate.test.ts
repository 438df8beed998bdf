import { describe, expect, it } from '@jest/globals';
import { credentialFieldsOf, interpolate, placeholdersOf, unknownPlaceholdersOf, usesCredentials } from './interpolate.js';

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
