import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { bytesDigest, freePort, pseudoRandomBytes, startOAuthServer, startUpstreamApi, type TestOAuthServer, type TestUpstreamApi } from '@latchkey/testing';
import { authorizationCodeTokens } from './support/oauth.js';
import { apiKeyProviderYaml, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let upstream: TestUpstreamApi;
let oauth: TestOAuthServer;
let custom: Server;
let customUrl: string;
/** A port nothing listens on. */
let closedPort: number;
const binary = randomBytes(4096);

function proxy(path: string, init: { method?: string; headers?: Record<string, string>; body?: string | Uint8Array; connection?: string; integration?: string } = {}) {
  return fetch(`${stack.url}/proxy${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${stack.bootstrapKey}`,
      'connection-id': init.connection ?? 'api',
      'provider-config-key': init.integration ?? 'api',
      ...init.headers,
    },
    ...(init.body === undefined ? {} : { body: init.body, duplex: 'half' }),
  } as RequestInit);
}

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  upstream = await startUpstreamApi();
  oauth = await startOAuthServer();
  const customPort = await freePort();
  custom = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/own-limits') {
        // A provider that sends a rate-limit header under the gateway's own name.
        res.writeHead(200, { 'X-RateLimit-Limit': '77', 'content-type': 'text/plain' });
        res.end('limited');
        return;
      }
      res.writeHead(201, { 'content-type': 'application/octet-stream', 'x-custom': 'yes', 'set-cookie': ['a=1', 'b=2'] });
      res.end(binary);
    });
  });
  await new Promise<void>((resolve) => custom.listen(customPort, '127.0.0.1', resolve));
  customUrl = `http://127.0.0.1:${customPort}`;
  closedPort = await freePort();

  const providersFile = writeProvidersFile(
    `${apiKeyProviderYaml(upstream.url)}loopback-query:
  display_name: Loopback query key
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: ${upstream.url}
    query:
      api_key: \${apiKey}
loopback-basic:
  display_name: Loopback basic
  categories: [test]
  auth_mode: BASIC
  proxy:
    base_url: ${upstream.url}
loopback-oauth:
  display_name: Loopback OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: ${oauth.authorizationUrl}
  token_url: ${oauth.tokenUrl}
  proxy:
    base_url: ${oauth.url}/api
`,
  );
  stack = await startStack({
    // Retries may wait as long as a provider asks, up to a minute: longer than a call's deadline.
    env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32', PROXY_TIMEOUT_MS: '8000', PROXY_RETRY_CAP_MS: '60000' },
  });
  // Base-Url-Override gets credentials only on these hosts: the custom server, a closed port, and
  // addresses the address policy must refuse on its own.
  const upstreamPort = new URL(upstream.url).port;
  const allowedHosts = [`127.0.0.1:${customPort}`, `127.0.0.1:${closedPort}`, `127.0.0.2:${upstreamPort}`, '10.0.0.1', '169.254.169.254', '[::1]'];
  for (const [key, provider] of [['api', 'loopback-api'], ['query', 'loopback-query'], ['basic', 'loopback-basic'], ['oauth', 'loopback-oauth']]) {
    await api('POST', '/integrations', {
      provider,
      unique_key: key,
      credentials: { client_id: 'test-client', client_secret: 'test-secret' },
      ...(key === 'api' ? { allowed_hosts: allowedHosts } : {}),
    });
  }
  await api('POST', '/connections', { provider_config_key: 'api', connection_id: 'api', credentials: { type: 'API_KEY', apiKey: 'upstream-key-123' } });
  await api('POST', '/connections', { provider_config_key: 'query', connection_id: 'query', credentials: { type: 'API_KEY', apiKey: 'query-key-456' } });
  await api('POST', '/connections', { provider_config_key: 'basic', connection_id: 'basic', credentials: { type: 'BASIC', username: 'ada', password: 'lovelace' } });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  await oauth?.close();
  custom?.close();
});

describe('the proxy', () => {
  it('forwards method, path, query and headers, injects the key, and never forwards our Authorization', async () => {
    const response = await proxy('/echo/items/42?limit=2&tag=a&tag=b', { headers: { 'service-proxy-x-trace': 'abc', accept: 'application/json', 'x-plain': '1' } });
    expect(response.status).toBe(200);
    const echo = (await response.json()) as { url: string; headers: Record<string, string> };
    expect(echo.url).toBe('/echo/items/42?limit=2&tag=a&tag=b');
    expect(echo.headers['x-trace']).toBe('abc');
    expect(echo.headers['x-plain']).toBe('1');
    expect(echo.headers['x-api-key']).toBe('upstream-key-123');
    expect(JSON.stringify(echo)).not.toContain(stack.bootstrapKey);
    expect(echo.headers['connection-id']).toBeUndefined();
    expect(echo.headers['provider-config-key']).toBeUndefined();
  });

  it('injects basic auth and query keys by auth mode', async () => {
    const basic = (await (await proxy('/echo', { connection: 'basic', integration: 'basic' })).json()) as { headers: Record<string, string> };
    expect(basic.headers['authorization']).toBe(`Basic ${Buffer.from('ada:lovelace').toString('base64')}`);
    const query = (await (await proxy('/echo?x=1', { connection: 'query', integration: 'query' })).json()) as { query: Record<string, string> };
    expect(query.query).toEqual({ x: '1', api_key: 'query-key-456' });
  });

  it("passes a service-proxy-Authorization and Cookie on under their names, unless the auth mode injects that header: then only the injected one goes", async () => {
    const headers = { 'service-proxy-authorization': 'Bearer provider-token', 'service-proxy-cookie': 'session=1', cookie: 'plain=1' };
    const keyed = (await (await proxy('/echo', { headers })).json()) as { headers: Record<string, string> };
    expect(keyed.headers['authorization']).toBe('Bearer provider-token');
    expect(keyed.headers['cookie']).toBe('session=1');
    expect(keyed.headers['x-api-key']).toBe('upstream-key-123');
    const basic = (await (await proxy('/echo', { connection: 'basic', integration: 'basic', headers })).json()) as { headers: Record<string, string>; rawHeaders: string[] };
    expect(basic.rawHeaders.filter((name) => name.toLowerCase() === 'authorization')).toHaveLength(1);
    expect(basic.headers['authorization']).toBe(`Basic ${Buffer.from('ada:lovelace').toString('base64')}`);
    expect(basic.headers['cookie']).toBe('session=1');
  });

  it('passes bodies unchanged: JSON, form, binary, with every method', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const json = await proxy('/echo', { method, headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
      const echo = (await json.json()) as { method: string; body: { text: string }; headers: Record<string, string> };
      expect(echo.method).toBe(method);
      expect(echo.body.text).toBe('{"a":1}');
      expect(echo.headers['content-type']).toBe('application/json');
    }
    const form = (await (await proxy('/echo', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=1&b=2' })).json()) as { body: { text: string } };
    expect(form.body.text).toBe('a=1&b=2');
    const raw = (await (await proxy('/echo', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: binary })).json()) as { body: { base64: string } };
    expect(Buffer.from(raw.body.base64, 'base64').equals(binary)).toBe(true);
    const head = await proxy('/echo', { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('returns status, headers and a binary body exactly as the provider gave them', async () => {
    const response = await proxy('/anything', { headers: { 'base-url-override': customUrl } });
    expect(response.status).toBe(201);
    expect(response.headers.get('x-custom')).toBe('yes');
    expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(Buffer.from(await response.arrayBuffer()).equals(binary)).toBe(true);
  });

  it("sends the gateway's request id and rate limit with the provider's headers; a provider's header of the same name wins", async () => {
    const response = await proxy('/anything', { headers: { 'base-url-override': customUrl, 'x-request-id': 'proxied-call-1' } });
    expect(response.status).toBe(201);
    expect(response.headers.get('x-request-id')).toBe('proxied-call-1');
    expect(Number(response.headers.get('x-ratelimit-limit'))).toBeGreaterThan(0);
    expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
    expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    expect(response.headers.get('x-custom')).toBe('yes');
    await response.arrayBuffer();

    const own = await proxy('/own-limits', { headers: { 'base-url-override': customUrl } });
    expect(own.status).toBe(200);
    expect(own.headers.get('x-ratelimit-limit')).toBe('77');
    expect(own.headers.get('x-ratelimit-remaining')).not.toBeNull();
    expect(own.headers.get('x-request-id')).not.toBeNull();
    expect(await own.text()).toBe('limited');
  });

  it('answers an error with the request id and rate limit headers', async () => {
    const response = await proxy('/anything', { headers: { 'base-url-override': customUrl, retries: 'many', 'x-request-id': 'proxied-call-2' } });
    expect(response.status).toBe(400);
    expect(response.headers.get('x-request-id')).toBe('proxied-call-2');
    expect(response.headers.get('x-ratelimit-limit')).not.toBeNull();
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_headers');
  });

  it('retries only when asked: 503, 503, 200 with Retries: 3, and 503 after one try without', async () => {
    upstream.reset();
    const retried = await proxy('/flaky/2', { headers: { retries: '3', 'service-proxy-x-test-id': 'r1' } });
    expect(retried.status).toBe(200);
    expect(upstream.requests.filter((request) => request.path === '/flaky/2')).toHaveLength(3);
    upstream.reset();
    const once = await proxy('/flaky/2', { headers: { 'service-proxy-x-test-id': 'r2' } });
    expect(once.status).toBe(503);
    expect(upstream.requests).toHaveLength(1);
    upstream.reset();
    const conflict = await proxy('/status/409', { headers: { retries: '2', 'retry-on': '409' } });
    expect(conflict.status).toBe(409);
    expect(upstream.requests).toHaveLength(3);
    upstream.reset();
    expect((await proxy('/status/409', { headers: { retries: '2' } })).status).toBe(409);
    expect(upstream.requests).toHaveLength(1);
    // Errors only: a success or a redirect retried would send a call the provider took again.
    upstream.reset();
    for (const status of ['200', '302', '399']) {
      const refused = await proxy('/status/200', { headers: { retries: '10', 'retry-on': status } });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('invalid_headers');
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it("takes no retry past the call's deadline: the provider's last answer comes back, not a 503 while the replica waits on", async () => {
    // Retries: 1 gives the call (8 s + 10 s) × 2 + 5 s = 41 s; the provider asks for 60 s.
    upstream.reset();
    const response = await proxy('/status/503?retry_after=60', { headers: { retries: '1' } });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('60');
    expect(await response.json()).toEqual({ status: 503 });
    expect(upstream.requests).toHaveLength(1);
  });

  it('passes gzip through as it came, or decodes it with Decompress: true', async () => {
    const raw = await fetch(`${upstream.url}/gzip`, { headers: { 'accept-encoding': 'identity' } });
    const compressed = Buffer.from(await raw.arrayBuffer());
    const passed = await proxy('/gzip', { headers: { 'accept-encoding': 'gzip' } });
    expect(passed.headers.get('content-encoding')).toBe('gzip');
    const decoded = await proxy('/gzip', { headers: { decompress: 'true' } });
    expect(decoded.headers.get('content-encoding')).toBeNull();
    const json = await decoded.json();
    expect(json).toMatchObject({ compressed: true });
    expect(compressed.length).toBeGreaterThan(0);
  });

  it('streams a 100 MiB download byte for byte with the proxy memory bounded', async () => {
    const size = 100 * 1024 * 1024;
    const proxyPid = stack.services.find((service) => service.service === 'proxy')!.child.pid!;
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proxyPid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 50);
    const hash = createHash('sha256');
    let received = 0;
    let response: Response;
    try {
      response = await proxy(`/bytes/${size}?seed=7`);
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        hash.update(chunk);
        received += chunk.length;
      }
    } finally {
      clearInterval(sampler);
    }
    expect(response.status).toBe(200);
    expect(received).toBe(size);
    expect(hash.digest('hex')).toBe(bytesDigest(size, 7));
    // Bounded means less than the body: a proxy that held it would grow by 100 MiB at least.
    // What it does grow by is dead ArrayBuffers (socket reads, chunks) awaiting V8's collector:
    // Node 24's V8 lets up to 64 MiB of them build up before it marks and sweeps them (Node 20's
    // scavenged them at about half that), whatever the body's size; the rest is heap and malloc
    // slack. Measured on Node 24: 66–94 MiB (Node 20: 45–61); docs/benchmarks.md has the why.
    expect(peak - before).toBeLessThan(96 * 1024 * 1024);
  }, 120_000);

  it('returns answers whole on either side of the inline limit', async () => {
    // Above the replica's flow-control mark, just under the inline limit, and just over it.
    for (const size of [300 * 1024, 900 * 1024, 1024 * 1024]) {
      const response = await proxy(`/bytes/${size}?seed=5`);
      const body = Buffer.from(await response.arrayBuffer());
      expect(response.status).toBe(200);
      expect(body.length).toBe(size);
      expect(createHash('sha256').update(body).digest('hex')).toBe(bytesDigest(size, 5));
    }
  });

  it('uploads a body larger than a NATS message', async () => {
    const big = pseudoRandomBytes(3 * 1024 * 1024, 3);
    const response = await proxy('/echo', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: big });
    const echo = (await response.json()) as { body: { base64: string; length: number } };
    expect(echo.body.length).toBe(big.length);
    expect(Buffer.from(echo.body.base64, 'base64').equals(big)).toBe(true);
  });

  it('refuses addresses outside PROXY_ALLOW_CIDRS before sending anything', async () => {
    upstream.reset();
    const port = new URL(upstream.url).port;
    for (const override of [`http://127.0.0.2:${port}`, 'http://10.0.0.1', 'http://169.254.169.254', 'http://[::1]:80']) {
      const response = await proxy('/echo', { headers: { 'base-url-override': override } });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('upstream_not_allowed');
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers 504 on an upstream timeout and 502 when the upstream is unreachable', async () => {
    const slow = await proxy('/slow/12000');
    expect(slow.status).toBe(504);
    expect(((await slow.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    const closed = await proxy('/echo', { headers: { 'base-url-override': `http://127.0.0.1:${closedPort}` } });
    expect(closed.status).toBe(502);
    expect(((await closed.json()) as { error: { code: string } }).error.code).toBe('upstream_unreachable');
  });

  it('validates its headers', async () => {
    const response = await fetch(`${stack.url}/proxy/echo`, { headers: { authorization: `Bearer ${stack.bootstrapKey}`, retries: 'many' } });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string; errors: Array<{ path: string }> } };
    expect(body.error.code).toBe('invalid_headers');
    expect(body.error.errors.map((item) => item.path).sort()).toEqual(['connection-id', 'provider-config-key', 'retries']);
  });

  it('refreshes once and replays after a 401 from the provider on an OAuth connection', async () => {
    const exchanged = await authorizationCodeTokens(oauth);
    await api('POST', '/connections', {
      provider_config_key: 'oauth',
      connection_id: 'oauth',
      credentials: { type: 'OAUTH2', access_token: exchanged.access_token, refresh_token: exchanged.refresh_token, expires_at: new Date(Date.now() + 3600_000).toISOString(), raw: {} },
    });
    expect((await proxy('/profile', { connection: 'oauth', integration: 'oauth' })).status).toBe(200);
    oauth.revokeAccessTokens();
    oauth.stats.reset();
    const replayed = await proxy('/profile', { connection: 'oauth', integration: 'oauth' });
    expect(replayed.status).toBe(200);
    expect(oauth.stats.grants.refresh_token).toBe(1);
  });

  it('sends the call with the token in hand when the token endpoint fails for now (503) near its expiry', async () => {
    const exchanged = await authorizationCodeTokens(oauth);
    await api('POST', '/connections', {
      provider_config_key: 'oauth',
      connection_id: 'oauth-provider-down',
      credentials: { type: 'OAUTH2', access_token: exchanged.access_token, refresh_token: exchanged.refresh_token, expires_at: new Date(Date.now() + 5 * 60_000).toISOString(), raw: {} },
    });
    oauth.stats.reset();
    oauth.failNextToken(503, { error: 'temporarily_unavailable' });
    const call = await proxy('/profile', { connection: 'oauth-provider-down', integration: 'oauth' });
    expect(call.status).toBe(200);
    expect(((await call.json()) as { token: string }).token).toBe(exchanged.access_token);
    expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([503]);
    const listed = await api('GET', '/connections?connectionId=oauth-provider-down');
    expect(listed.json.connections[0].errors).toEqual([]);
  });

  // A refresh waiting for a slow token endpoint outlasted the bus's 5 s deadline: the read and
  // the call answered 503 while the vault went on and stored the new token. The vault now says
  // it is at work meanwhile, and its callers wait for what it got.
  it('waits for a refresh slower than the bus deadline, on a read of the connection and on a proxy call', async () => {
    for (const connectionId of ['oauth-slow-read', 'oauth-slow-call']) {
      const exchanged = await authorizationCodeTokens(oauth);
      await api('POST', '/connections', {
        provider_config_key: 'oauth',
        connection_id: connectionId,
        credentials: { type: 'OAUTH2', access_token: exchanged.access_token, refresh_token: exchanged.refresh_token, expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} },
      });
    }
    oauth.stats.reset();
    oauth.setOptions({ tokenDelayMs: 6_000 });
    try {
      const [read, call] = await Promise.all([
        api('GET', '/connections/oauth-slow-read?provider_config_key=oauth'),
        proxy('/profile', { connection: 'oauth-slow-call', integration: 'oauth' }),
      ]);
      expect(read.status).toBe(200);
      expect(oauth.stats.issuedAccessTokens()).toContain(read.json.credentials.access_token);
      expect(call.status).toBe(200);
      expect(oauth.stats.grants.refresh_token).toBe(2);
    } finally {
      oauth.setOptions({ tokenDelayMs: 0 });
    }
  }, 30_000);
});
