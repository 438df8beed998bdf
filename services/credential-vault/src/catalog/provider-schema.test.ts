import { describe, expect, it } from '@jest/globals';
import { providerSchema, toPublicProvider, type ProviderInput } from './provider-schema.js';

const oauth: ProviderInput = {
  display_name: 'Acme',
  categories: ['crm'],
  logo_url: '/images/providers/acme.svg',
  auth_mode: 'OAUTH2',
  authorization_url: 'https://${connectionConfig.subdomain}.acme.test/oauth/authorize',
  token_url: 'https://${connectionConfig.subdomain}.acme.test/oauth/token',
  connection_configuration: ['subdomain'],
  token_request_auth_method: 'basic',
  authorization_params: { access_type: 'offline' },
  proxy: {
    base_url: 'https://${connectionConfig.subdomain}.acme.test/api',
    headers: { 'X-Version': '2' },
    paginate: { type: 'cursor', cursor_path_in_response: 'next', cursor_name_in_request: 'cursor' },
    retry: { after: 'retry-after' },
  },
  webhook: { signature_header: 'X-Acme-Signature', algorithm: 'sha256', encoding: 'hex', routing: { body_path: 'account.id', match: 'connection_config', key: 'account_id' } },
  docs: 'https://developers.acme.test',
};

const messagesOf = (input: unknown) => {
  const result = providerSchema.safeParse(input);
  return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
};

describe('providerSchema', () => {
  it('takes proxy.allowed_hosts as host names, ports and subdomain wildcards only', () => {
    const withHosts = (allowed_hosts: string[]) => ({ display_name: 'K', auth_mode: 'BASIC', proxy: { base_url: 'https://k.test', allowed_hosts } });
    expect(providerSchema.parse(withHosts(['eu.k.test', 'k.test:8443', '*.sandbox.k.test'])).proxy?.allowed_hosts).toEqual(['eu.k.test', 'k.test:8443', '*.sandbox.k.test']);
    for (const host of ['https://k.test', 'k.test/path', '*.test', '*', 'k.test:', 'user@k.test']) {
      expect(messagesOf(withHosts([host]))).toHaveLength(1);
    }
  });

  it('takes a verification request for form-based modes only, with a base URL to call', () => {
    const apiKey = { display_name: 'K', auth_mode: 'API_KEY', proxy: { base_url: 'https://k.test', headers: { 'X-Key': '${apiKey}' } } };
    expect(providerSchema.parse({ ...apiKey, verification: { endpoints: ['/me'] } }).verification).toEqual({ method: 'GET', endpoints: ['/me'] });
    expect(messagesOf({ ...apiKey, verification: { endpoints: [] } })).toEqual(['verification.endpoints: Too small: expected array to have >=1 items']);
    expect(messagesOf({ display_name: 'B', auth_mode: 'BASIC', verification: { endpoints: ['/me'] } })).toEqual(['verification: needs base_url_override or a proxy.base_url']);
    expect(messagesOf({ ...oauth, verification: { endpoints: ['/me'] } })).toEqual(['verification: applies to form-based auth modes, not OAUTH2']);
    // A token made or bought from what was typed does not exist yet when the verification would run.
    const signature = { display_name: 'S', auth_mode: 'SIGNATURE', proxy: { base_url: 'https://s.test' }, token_request: { url: 'https://s.test/login', token_path: 'token', expires_in_seconds: 600 } };
    expect(messagesOf({ ...signature, verification: { endpoints: ['/me'] } })).toEqual([
      'verification: applies to form-based auth modes whose credentials are sent as typed, not SIGNATURE (its token is made from them once saved)',
    ]);
    expect(messagesOf({ display_name: 'B', auth_mode: 'BASIC', verification: { endpoints: ['/me'], base_url_override: 'https://${connectionConfig.host}/' } })).toEqual([
      'verification.base_url_override: uses ${connectionConfig.host} but connection_configuration does not list "host"',
    ]);
  });

  it('accepts a full entry and applies defaults', () => {
    const provider = providerSchema.parse(oauth);
    expect(provider.scope_separator).toBe(' ');
    expect(provider.proxy?.decompress).toBe(false);
    expect(providerSchema.parse({ display_name: 'Open', auth_mode: 'NONE' })).toMatchObject({ categories: [], connection_configuration: [] });
  });

  it('requires the OAuth endpoints each mode needs', () => {
    expect(messagesOf({ display_name: 'A', auth_mode: 'OAUTH2' })).toEqual([
      'authorization_url: is required for auth_mode OAUTH2',
      'token_url: is required for auth_mode OAUTH2',
    ]);
    expect(messagesOf({ display_name: 'A', auth_mode: 'OAUTH1', authorization_url: 'https://a.test/a', token_url: 'https://a.test/t' })).toEqual([
      'request_url: is required for auth_mode OAUTH1',
    ]);
    expect(messagesOf({ display_name: 'A', auth_mode: 'OAUTH2_CC' })).toEqual(['token_url: is required for auth_mode OAUTH2_CC']);
    expect(messagesOf({ display_name: 'A', auth_mode: 'OAUTH2_CC', token_url: 'https://a.test/t' })).toEqual([]);
  });

  it('requires every connection config key a template reads to be listed', () => {
    expect(messagesOf({ ...oauth, connection_configuration: [] })).toEqual([
      'authorization_url: uses ${connectionConfig.subdomain} but connection_configuration does not list "subdomain"',
      'token_url: uses ${connectionConfig.subdomain} but connection_configuration does not list "subdomain"',
      'proxy.base_url: uses ${connectionConfig.subdomain} but connection_configuration does not list "subdomain"',
    ]);
  });

  it('refuses unknown placeholders, misspelt keys and non-URLs', () => {
    expect(messagesOf({ ...oauth, proxy: { base_url: 'https://api.acme.test', headers: { Authorization: 'Bearer ${apikey}' } } })).toEqual([
      'proxy.headers.Authorization: unknown placeholder ${apikey}',
    ]);
    expect(messagesOf({ ...oauth, proxy: { base_ur: 'https://api.acme.test' } })).toEqual(
      expect.arrayContaining([expect.stringMatching(/^proxy: Unrecognized key: "base_ur"/)]),
    );
    expect(messagesOf({ ...oauth, token_url: 'ftp://acme.test/token' })).toEqual(['token_url: must be an http(s) URL (placeholders allowed)']);
    expect(messagesOf({ ...oauth, auth_mode: 'PASSWORD' })).toEqual([expect.stringMatching(/^auth_mode: /)]);
  });

  it('makes an API_KEY provider say where the key goes', () => {
    const apiKey = { display_name: 'Keyed', auth_mode: 'API_KEY' };
    expect(messagesOf({ ...apiKey, proxy: { base_url: 'https://api.keyed.test' } })).toEqual([
      'proxy: an API_KEY provider must place ${apiKey} in proxy.headers, proxy.query or proxy.base_url',
    ]);
    expect(messagesOf({ ...apiKey, proxy: { base_url: 'https://api.keyed.test', query: { key: '${apiKey}' } } })).toEqual([]);
    expect(
      messagesOf({
        ...apiKey,
        proxy: { base_url: 'https://api.keyed.test', headers: { 'X-App': '${credentials.app_key}' } },
        credentials: { apiKey: { type: 'string' } },
      }),
    ).toEqual(['proxy.headers.X-App: uses ${credentials.app_key} but credentials does not define "app_key"']);
  });
});

describe('webhook', () => {
  const withWebhook = (webhook: Record<string, unknown>) => ({ display_name: 'W', auth_mode: 'API_KEY', proxy: { base_url: 'https://w.test', headers: { 'X-Key': '${apiKey}' } }, webhook });
  const standard = { signature_header: 'webhook-signature', algorithm: 'sha256', encoding: 'base64', prefix: 'v1,' };

  it('takes a timestamp and a delivery id only when the signature covers them', () => {
    expect(messagesOf(withWebhook({ ...standard, signed_content: '{id}.{timestamp}.{body}', timestamp_header: 'webhook-timestamp', id_header: 'webhook-id' }))).toEqual([]);
    expect(messagesOf(withWebhook({ ...standard, id_header: 'X-Delivery' }))).toEqual(['webhook.id_header: id_header is set exactly when signed_content contains {id}']);
    expect(messagesOf(withWebhook({ ...standard, signed_content: 'v0:{timestamp}:{body}' }))).toEqual([
      'webhook.timestamp_header: timestamp_header is set exactly when signed_content contains {timestamp}',
    ]);
    expect(messagesOf(withWebhook({ ...standard, signed_content: '{timestamp}', timestamp_header: 'T' }))).toEqual(['webhook.signed_content: must contain {body}']);
  });
});

describe('token_request', () => {
  const bill = {
    display_name: 'Bill',
    auth_mode: 'BILL',
    connection_configuration: ['region'],
    token_request: {
      url: 'https://${connectionConfig.region}.bill.test/api/v2/Login.json',
      body_format: 'form',
      body: { userName: '${credentials.username}', password: '${password}', devKey: '${credentials.dev_key}' },
      token_path: 'response_data.sessionId',
      expires_in_seconds: 2100,
    },
  };

  it('is accepted for the token-bearing modes, with defaults, and stays internal', () => {
    const provider = providerSchema.parse(bill);
    expect(provider.token_request).toMatchObject({ method: 'POST', body_format: 'form', token_path: 'response_data.sessionId' });
    expect(providerSchema.parse({ ...bill, auth_mode: 'TWO_STEP' }).token_request?.method).toBe('POST');
    expect(toPublicProvider('bill', provider, 'https://latchkey.test')).not.toHaveProperty('token_request');
  });

  it('checks its templates like the others', () => {
    expect(messagesOf({ ...bill, connection_configuration: [] })).toEqual([
      'token_request.url: uses ${connectionConfig.region} but connection_configuration does not list "region"',
    ]);
    expect(messagesOf({ ...bill, credentials: { username: { type: 'string' } } })).toEqual([
      'token_request.body.devKey: uses ${credentials.dev_key} but credentials does not define "dev_key"',
    ]);
    expect(messagesOf({ ...bill, token_request: { ...bill.token_request, headers: { 'X-Key': '${devKey}' } } })).toEqual([
      'token_request.headers.X-Key: unknown placeholder ${devKey}',
    ]);
  });

  it('refuses other modes, a body on GET, a bad path and a missing lifetime', () => {
    expect(messagesOf({ ...bill, auth_mode: 'API_KEY' })).toEqual(['token_request: applies to auth_mode TWO_STEP, BILL, SIGNATURE, not API_KEY']);
    expect(messagesOf({ ...bill, token_request: { ...bill.token_request, method: 'GET' } })).toEqual(['token_request.body: a GET token request has no body']);
    expect(messagesOf({ ...bill, token_request: { ...bill.token_request, token_path: 'a..b' } })).toEqual([
      'token_request.token_path: must be a dotted path such as response_data.sessionId',
    ]);
    const { expires_in_seconds: _, ...noLifetime } = bill.token_request;
    expect(messagesOf({ ...bill, token_request: noLifetime })).toEqual(['token_request: needs expires_in_path or expires_in_seconds']);
  });
});

describe('toPublicProvider', () => {
  it('returns exactly the spec fields, in the spec order', () => {
    const provider = toPublicProvider('acme', providerSchema.parse(oauth), 'https://latchkey.test/');
    expect(provider).toEqual({
      name: 'acme',
      display_name: 'Acme',
      // A catalog path is not served anywhere: the gateway's logo route is, absolute.
      logo_url: 'https://latchkey.test/logos/acme.svg',
      categories: ['crm'],
      auth_mode: 'OAUTH2',
      authorization_url: 'https://${connectionConfig.subdomain}.acme.test/oauth/authorize',
      token_url: 'https://${connectionConfig.subdomain}.acme.test/oauth/token',
      connection_configuration: ['subdomain'],
      proxy: {
        base_url: 'https://${connectionConfig.subdomain}.acme.test/api',
        decompress: false,
        paginate: { type: 'cursor', cursor_path_in_response: 'next', cursor_name_in_request: 'cursor' },
      },
      docs: 'https://developers.acme.test',
    });
    expect(Object.keys(provider)).toEqual([
      'name',
      'display_name',
      'logo_url',
      'categories',
      'auth_mode',
      'authorization_url',
      'token_url',
      'connection_configuration',
      'proxy',
      'docs',
    ]);
  });

  it('keeps an https logo the entry names', () => {
    const provider = toPublicProvider('own', providerSchema.parse({ display_name: 'Own', auth_mode: 'API_KEY', logo_url: 'https://cdn.example/own.svg' }), 'https://latchkey.test');
    expect(provider.logo_url).toBe('https://cdn.example/own.svg');
  });

  it('omits absent optional fields and carries the script names', () => {
    const provider = toPublicProvider(
      'plain',
      providerSchema.parse({ display_name: 'Plain', auth_mode: 'API_KEY', post_connection_script: 'plain-post', webhook_routing_script: 'plain-route' }),
      'https://latchkey.test',
    );
    expect(provider).toEqual({
      name: 'plain',
      display_name: 'Plain',
      logo_url: 'https://latchkey.test/logos/plain.svg',
      categories: [],
      auth_mode: 'API_KEY',
      connection_configuration: [],
      post_connection_script: 'plain-post',
      webhook_routing_script: 'plain-route',
    });
  });
});
