import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { Latchkey, LatchkeyError } from '@latchkey/client';
import { bytesDigest, freePort, gzipPayload, pseudoRandomBytes, startUpstreamApi, type TestUpstreamApi, type UpstreamEcho } from '@latchkey/testing';
import { apiKeyProviderYaml, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

/** The SDK's proxy operations (proxy, get, post, put, patch, delete) against the running stack and a loopback provider. */

let stack: Stack;
let upstream: TestUpstreamApi;
let other: TestUpstreamApi;
let held: Server;
let heldUrl: string;
/** A provider whose error answers look like ours: our envelope, and even our `Latchkey-Error` header. */
let lookalike: Server;
let lookalikeUrl: string;
const lookalikeHits: string[] = [];
let release: () => void = () => undefined;
let latchkey: Latchkey;

const target = { providerConfigKey: 'api', connectionId: 'api' };
const HELD_HEAD = pseudoRandomBytes(2 * 1024 * 1024, 11);
const HELD_TAIL = pseudoRandomBytes(1024 * 1024, 12);

async function rejection(promise: Promise<unknown>): Promise<LatchkeyError> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(LatchkeyError);
  return error as LatchkeyError;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A port nothing listens on. */
let closedPort: number;

beforeAll(async () => {
  upstream = await startUpstreamApi();
  other = await startUpstreamApi();
  // Sends more than the proxy carries inline, then holds the rest back until the test releases it.
  const heldPort = await freePort();
  held = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': HELD_HEAD.length + HELD_TAIL.length });
    res.write(HELD_HEAD);
    const released = new Promise<void>((resolve) => (release = resolve));
    void released.then(() => res.end(HELD_TAIL));
  });
  await new Promise<void>((resolve) => held.listen(heldPort, '127.0.0.1', resolve));
  heldUrl = `http://127.0.0.1:${heldPort}`;
  const lookalikePort = await freePort();
  lookalike = createServer((req, res) => {
    req.resume();
    lookalikeHits.push(`${req.method} ${req.url}`);
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/envelope/404') json(404, { error: { code: 'not_found', message: 'No such ticket' } });
    else if (req.url === '/envelope/403') json(403, { error: { code: 'forbidden', message: 'Not your ticket' } });
    else if (req.url === '/envelope/429') json(429, { error: { code: 'too_many_requests', message: 'Slow down' } }, { 'retry-after': '1' });
    else if (req.url === '/forged') json(404, { error: { code: 'unknown_connection', message: 'forged' } }, { 'Latchkey-Error': 'unknown_connection' });
    else json(200, { ok: true });
  });
  await new Promise<void>((resolve) => lookalike.listen(lookalikePort, '127.0.0.1', resolve));
  lookalikeUrl = `http://127.0.0.1:${lookalikePort}`;

  const providersFile = writeProvidersFile(
    apiKeyProviderYaml(upstream.url),
  );
  // An 8 s upstream timeout: it is also how long a stream may idle, and the 20 MiB one must
  // outlast a reader stalled by a loaded machine (2 s did not, in the proxy's own e2e).
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32', PROXY_TIMEOUT_MS: '8000' } });
  const api = (path: string, body: unknown) => http(`${stack.url}${path}`, { method: 'POST', token: stack.bootstrapKey, body });
  closedPort = await freePort();
  // baseUrlOverride gets credentials only on these hosts (10.0.0.1 for the address policy to refuse).
  const allowedHosts = [new URL(other.url).host, `127.0.0.1:${heldPort}`, `127.0.0.1:${lookalikePort}`, `127.0.0.1:${closedPort}`, '10.0.0.1'];
  await api('/integrations', {
    provider: 'loopback-api',
    unique_key: 'api',
    credentials: { client_id: 'test-client', client_secret: 'test-secret' },
    allowed_hosts: allowedHosts,
  });
  await api('/connections', { provider_config_key: 'api', connection_id: 'api', credentials: { type: 'API_KEY', apiKey: 'upstream-key-123' } });
  latchkey = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
}, 60_000);

afterAll(async () => {
  release();
  await stack?.dispose();
  await upstream?.close();
  await other?.close();
  held?.closeAllConnections();
  held?.close();
  lookalike?.closeAllConnections();
  lookalike?.close();
});

describe('the SDK proxy', () => {
  it('get: endpoint with or without a leading slash, params, injected credentials, axios-shaped response', async () => {
    const response = await latchkey.get<UpstreamEcho>({ ...target, endpoint: '/echo/items/42', params: { limit: 2, tag: ['a', 'b c'], skip: undefined } });
    expect(response.status).toBe(200);
    expect(response.statusText).toBe('OK');
    expect(response.headers['content-type']).toBe('application/json');
    expect(response.data.method).toBe('GET');
    expect(response.data.path).toBe('/echo/items/42');
    expect(response.data.query).toEqual({ limit: '2', tag: ['a', 'b c'] });
    expect(response.data.headers['x-api-key']).toBe('upstream-key-123');
    expect(JSON.stringify(response.data)).not.toContain(stack.bootstrapKey);
    expect(response.data.headers['connection-id']).toBeUndefined();
    expect(response.data.headers['retries']).toBeUndefined();

    const joined = await latchkey.get<UpstreamEcho>({ ...target, endpoint: 'echo?a=1', params: 'b=2&c=x%20y' });
    expect(joined.data.url).toBe('/echo?a=1&b=2&c=x%20y');
    const searchParams = await latchkey.get<UpstreamEcho>({ ...target, endpoint: 'echo', params: new URLSearchParams({ q: 'ü' }) });
    expect(searchParams.data.query).toEqual({ q: 'ü' });
  });

  it('headers reach the provider as sent, Authorization included, without replacing the injected key', async () => {
    const { data } = await latchkey.get<UpstreamEcho>({
      ...target,
      endpoint: '/echo',
      headers: { 'X-Trace': 'abc', 'X-Count': 3, Authorization: 'Bearer provider-token', 'X-Api-Key': 'spoofed', 'User-Agent': 'my-agent/1.0', 'X-Skip': undefined },
    });
    expect(data.headers['x-trace']).toBe('abc');
    expect(data.headers['x-count']).toBe('3');
    // The caller's Authorization goes (prefixed, it is not the Latchkey key), as the auth mode
    // injects none; the key goes where the catalog places it, and only there; what is injected
    // wins over the caller's header of the same name.
    expect(data.headers['authorization']).toBe('Bearer provider-token');
    expect(data.headers['x-api-key']).toBe('upstream-key-123');
    expect(data.headers['user-agent']).toBe('my-agent/1.0');
    expect(data.headers['x-skip']).toBeUndefined();
    expect(Object.keys(data.headers).some((name) => name.startsWith('service-proxy-'))).toBe(false);
    expect(JSON.stringify(data)).not.toContain(stack.bootstrapKey);
  });

  it('post: objects and arrays go as JSON; a caller content type is kept and not doubled', async () => {
    const json = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', data: { a: 1, nested: { b: [true, null] } } });
    expect(json.data.method).toBe('POST');
    expect(json.data.headers['content-type']).toBe('application/json');
    expect(JSON.parse(json.data.body.text!)).toEqual({ a: 1, nested: { b: [true, null] } });

    const array = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', data: [1, 2, 3] });
    expect(array.data.body.text).toBe('[1,2,3]');

    const vendor = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', headers: { 'Content-Type': 'application/vnd.api+json' }, data: { data: { type: 'x' } } });
    expect(vendor.data.headers['content-type']).toBe('application/vnd.api+json');
    expect(vendor.data.rawHeaders.filter((_, index) => index % 2 === 0 && vendor.data.rawHeaders[index]!.toLowerCase() === 'content-type')).toHaveLength(1);
  });

  it('post: strings, Buffers, Uint8Arrays, forms and streams are sent as they are', async () => {
    const text = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', headers: { 'content-type': 'text/plain' }, data: 'plain text' });
    expect(text.data.body.text).toBe('plain text');
    expect(text.data.headers['content-type']).toBe('text/plain');

    const bytes = pseudoRandomBytes(4096, 5);
    const buffer = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', headers: { 'content-type': 'application/octet-stream' }, data: bytes });
    expect(Buffer.from(buffer.data.body.base64, 'base64').equals(bytes)).toBe(true);
    const view = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', data: new Uint8Array(bytes) });
    expect(Buffer.from(view.data.body.base64, 'base64').equals(bytes)).toBe(true);

    const form = await latchkey.post<UpstreamEcho>({ ...target, endpoint: '/echo', data: new URLSearchParams({ a: '1', b: 'x y' }) });
    expect(form.data.body.text).toBe('a=1&b=x+y');
    expect(form.data.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);

    // Larger than a NATS message, so the gateway streams it on.
    const big = pseudoRandomBytes(3 * 1024 * 1024, 6);
    const streamed = await latchkey.post<UpstreamEcho>({
      ...target,
      endpoint: '/echo',
      headers: { 'content-type': 'application/octet-stream' },
      data: Readable.from([big.subarray(0, 1_000_000), big.subarray(1_000_000)]),
    });
    expect(streamed.data.body.length).toBe(big.length);
    expect(Buffer.from(streamed.data.body.base64, 'base64').equals(big)).toBe(true);
  });

  it('put, patch and delete; proxy() with any method, GET by default', async () => {
    const put = await latchkey.put<UpstreamEcho>({ ...target, endpoint: '/echo/1', data: { name: 'put' } });
    expect(put.data).toMatchObject({ method: 'PUT', path: '/echo/1', body: { text: '{"name":"put"}' } });
    const patch = await latchkey.patch<UpstreamEcho>({ ...target, endpoint: '/echo/1', data: { name: 'patch' } });
    expect(patch.data).toMatchObject({ method: 'PATCH', body: { text: '{"name":"patch"}' } });
    const remove = await latchkey.delete<UpstreamEcho>({ ...target, endpoint: '/echo/1' });
    expect(remove.data).toMatchObject({ method: 'DELETE', body: { length: 0 } });
    const removeWithBody = await latchkey.delete<UpstreamEcho>({ ...target, endpoint: '/echo/1', data: { ids: [1] } });
    expect(removeWithBody.data.body.text).toBe('{"ids":[1]}');

    const byDefault = await latchkey.proxy<UpstreamEcho>({ ...target, endpoint: '/echo' });
    expect(byDefault.data.method).toBe('GET');
    const lower = await latchkey.proxy<UpstreamEcho>({ ...target, endpoint: '/echo', method: 'patch', data: 'x' });
    expect(lower.data.method).toBe('PATCH');
    const head = await latchkey.proxy({ ...target, endpoint: '/echo', method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.data).toBe('');
  });

  it('retries and retryOn become Retries and Retry-On', async () => {
    upstream.reset();
    const retried = await latchkey.get<{ ok: boolean; attempt: number }>({ ...target, endpoint: '/flaky/2', retries: 3, headers: { 'x-test-id': 'sdk-1' } });
    expect(retried.data).toEqual({ ok: true, attempt: 3 });
    expect(upstream.requests.filter((request) => request.path === '/flaky/2')).toHaveLength(3);

    upstream.reset();
    const once = await rejection(latchkey.get({ ...target, endpoint: '/flaky/2', headers: { 'x-test-id': 'sdk-2' } }));
    expect(once).toMatchObject({ status: 503, code: 'provider_error', payload: { status: 503, data: { error: 'unavailable', attempt: 1 } } });
    expect(upstream.requests).toHaveLength(1);

    upstream.reset();
    const conflict = await rejection(latchkey.post({ ...target, endpoint: '/status/409', retries: 2, retryOn: [409], data: { a: 1 } }));
    expect(conflict).toMatchObject({ status: 409, code: 'provider_error' });
    expect(upstream.requests).toHaveLength(3);

    upstream.reset();
    await rejection(latchkey.get({ ...target, endpoint: '/status/409', retries: 2 }));
    expect(upstream.requests).toHaveLength(1);
  });

  it('baseUrlOverride sends the call to another base URL', async () => {
    upstream.reset();
    other.reset();
    const { data } = await latchkey.get<UpstreamEcho>({ ...target, endpoint: '/echo/elsewhere', baseUrlOverride: other.url });
    expect(data.path).toBe('/echo/elsewhere');
    expect(data.headers['x-api-key']).toBe('upstream-key-123');
    expect(other.requests).toHaveLength(1);
    expect(upstream.requests).toHaveLength(0);
  });

  it('decompress: the proxy decodes when asked, else passes the encoded bytes through', async () => {
    const decoded = await latchkey.get({ ...target, endpoint: '/gzip', decompress: true });
    expect(decoded.headers['content-encoding']).toBeUndefined();
    expect(decoded.data).toEqual(gzipPayload());

    const raw = await latchkey.get({ ...target, endpoint: '/gzip', responseType: 'arraybuffer' });
    expect(raw.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(Buffer.from(raw.data)).toString('utf8'))).toEqual(gzipPayload());

    const explicit = await latchkey.get({ ...target, endpoint: '/gzip', decompress: false, responseType: 'arraybuffer' });
    expect(explicit.headers['content-encoding']).toBe('gzip');

    // Read as JSON, a body that is still encoded is decoded by the SDK.
    const parsed = await latchkey.get({ ...target, endpoint: '/gzip' });
    expect(parsed.headers['content-encoding']).toBe('gzip');
    expect(parsed.data).toEqual(gzipPayload());
  });

  it('responseType: json, text, document, arraybuffer, blob', async () => {
    const json = await latchkey.get({ ...target, endpoint: '/echo', responseType: 'json' });
    expect(json.data).toMatchObject({ method: 'GET' });
    const text = await latchkey.get({ ...target, endpoint: '/echo', responseType: 'text' });
    expect(typeof text.data).toBe('string');
    expect(JSON.parse(text.data)).toMatchObject({ method: 'GET' });
    const document = await latchkey.get({ ...target, endpoint: '/echo', responseType: 'document' });
    expect(typeof document.data).toBe('string');

    const bytes = await latchkey.get({ ...target, endpoint: '/bytes/4096', params: { seed: 3 }, responseType: 'arraybuffer' });
    expect(bytes.data).toBeInstanceOf(ArrayBuffer);
    expect(Buffer.from(bytes.data).equals(pseudoRandomBytes(4096, 3))).toBe(true);
    // Without a response type, a non-JSON body is text.
    const fallback = await latchkey.get({ ...target, endpoint: '/bytes/16', params: { seed: 3 } });
    expect(typeof fallback.data).toBe('string');

    const blob = await latchkey.get({ ...target, endpoint: '/bytes/100', params: { seed: 4 }, responseType: 'blob' });
    expect(blob.data.size).toBe(100);
    expect(blob.data.type).toBe('application/octet-stream');
    expect(Buffer.from(await blob.data.arrayBuffer()).equals(pseudoRandomBytes(100, 4))).toBe(true);
  });

  it("responseType 'stream' resolves at the headers and streams the body byte for byte", async () => {
    const size = 20 * 1024 * 1024;
    const response = await latchkey.get({ ...target, endpoint: `/bytes/${size}`, params: { seed: 9 }, responseType: 'stream' });
    expect(response.status).toBe(200);
    expect(response.data).toBeInstanceOf(Readable);
    const hash = createHash('sha256');
    let received = 0;
    for await (const chunk of response.data as AsyncIterable<Buffer>) {
      hash.update(chunk);
      received += chunk.length;
    }
    expect(received).toBe(size);
    expect(hash.digest('hex')).toBe(bytesDigest(size, 9));
  }, 60_000);

  it("responseType 'stream' does not wait for the body to end", async () => {
    let timer: NodeJS.Timeout | undefined;
    const response = await Promise.race([
      latchkey.get({ ...target, endpoint: '/held', baseUrlOverride: heldUrl, responseType: 'stream' }),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('the SDK waited for the whole body')), 10_000))),
    ]);
    clearTimeout(timer);
    release();
    const body = await readAll(response.data);
    expect(body.equals(Buffer.concat([HELD_HEAD, HELD_TAIL]))).toBe(true);
  }, 30_000);

  it("rejects with our error code when the gateway or proxy refused, with provider_error when the provider did", async () => {
    const unknown = await rejection(latchkey.get({ ...target, connectionId: 'nobody', endpoint: '/echo' }));
    expect(unknown).toMatchObject({ status: 404, code: 'unknown_connection' });

    const missing = await rejection(latchkey.get({ ...target, endpoint: '/no/such/path' }));
    expect(missing).toMatchObject({ status: 404, code: 'provider_error', payload: { status: 404, data: { error: 'not_found', path: '/no/such/path' } } });
    expect((missing.payload!['headers'] as Record<string, string>)['content-type']).toBe('application/json');

    const status = await rejection(latchkey.get({ ...target, endpoint: '/status/404' }));
    expect(status).toMatchObject({ status: 404, code: 'provider_error', payload: { status: 404, data: { status: 404 } } });
    const limited = await rejection(latchkey.get({ ...target, endpoint: '/status/429', params: { retry_after: 7 } }));
    expect(limited).toMatchObject({ status: 429, code: 'provider_error', retryAfter: 7 });

    // The same status from either side: 504 is ours on an upstream timeout, the provider's from /status/504.
    const timeout = await rejection(latchkey.get({ ...target, endpoint: '/slow/20000' }));
    expect(timeout).toMatchObject({ status: 504, code: 'upstream_timeout' });
    const gatewayTimeout = await rejection(latchkey.get({ ...target, endpoint: '/status/504' }));
    expect(gatewayTimeout).toMatchObject({ status: 504, code: 'provider_error', payload: { status: 504 } });

    const closed = await rejection(latchkey.get({ ...target, endpoint: '/echo', baseUrlOverride: `http://127.0.0.1:${closedPort}` }));
    expect(closed).toMatchObject({ status: 502, code: 'upstream_unreachable' });
    const notAllowed = await rejection(latchkey.get({ ...target, endpoint: '/echo', baseUrlOverride: 'http://10.0.0.1' }));
    expect(notAllowed).toMatchObject({ status: 400, code: 'upstream_not_allowed' });
    const invalid = await rejection(latchkey.get({ ...target, endpoint: '/echo', retries: 99 }));
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_headers' });
    expect(invalid.errors?.map((item) => item.path)).toEqual(['retries']);

    const streamed = await rejection(latchkey.get({ ...target, endpoint: '/status/500', responseType: 'stream' }));
    expect(streamed).toMatchObject({ status: 500, code: 'provider_error', payload: { status: 500, data: { status: 500 } } });

    const wrongKey = new Latchkey({ host: stack.url, apiKey: 'lk_sk_unknown' });
    await expect(wrongKey.get({ ...target, endpoint: '/echo' })).rejects.toMatchObject({ status: 401, code: 'unknown_api_key' });
    const created = await http(`${stack.url}/admin/environments/dev/api-keys`, {
      method: 'POST',
      token: stack.adminToken,
      body: { display_name: 'no proxy', scopes: ['environment:variables:read'] },
    });
    const noProxy = new Latchkey({ host: stack.url, apiKey: created.json.data.secret });
    await expect(noProxy.get({ ...target, endpoint: '/echo' })).rejects.toMatchObject({ status: 403, code: 'forbidden' });
  }, 60_000);

  it("takes a provider's error for the provider's even when it looks like ours: only the gateway's Latchkey-Error header says ours", async () => {
    const lookalikeTarget = { ...target, baseUrlOverride: lookalikeUrl };
    const notFound = await rejection(latchkey.get({ ...lookalikeTarget, endpoint: '/envelope/404' }));
    expect(notFound).toMatchObject({ status: 404, code: 'provider_error', payload: { status: 404, data: { error: { code: 'not_found', message: 'No such ticket' } } } });
    const forbidden = await rejection(latchkey.get({ ...lookalikeTarget, endpoint: '/envelope/403' }));
    expect(forbidden).toMatchObject({ status: 403, code: 'provider_error' });

    // A provider's 429 is never replayed by the client, whatever its body says: only the caller's `retries` ask the proxy to.
    lookalikeHits.length = 0;
    const limited = await rejection(latchkey.post({ ...lookalikeTarget, endpoint: '/envelope/429', data: { charge: 1 } }));
    expect(limited).toMatchObject({ status: 429, code: 'provider_error', retryAfter: 1 });
    expect(lookalikeHits).toEqual(['POST /envelope/429']);

    // The marker itself cannot be forged: the gateway drops it from a provider's answer.
    const forged = await rejection(latchkey.get({ ...lookalikeTarget, endpoint: '/forged' }));
    expect(forged).toMatchObject({ status: 404, code: 'provider_error', payload: { data: { error: { code: 'unknown_connection', message: 'forged' } } } });
    expect((forged.payload!['headers'] as Record<string, string>)['latchkey-error']).toBeUndefined();
    const raw = await fetch(`${stack.url}/proxy/forged`, {
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'api', 'provider-config-key': 'api', 'base-url-override': lookalikeUrl },
    });
    expect(raw.status).toBe(404);
    expect(raw.headers.get('latchkey-error')).toBeNull();
    await raw.text();

    // The gateway's own errors carry it, with the code, so that even a HEAD (no body) tells which side answered.
    const ours = await fetch(`${stack.url}/proxy/echo`, { headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'nobody', 'provider-config-key': 'api' } });
    expect(ours.status).toBe(404);
    expect(ours.headers.get('latchkey-error')).toBe('unknown_connection');
    await ours.text();
    const head = await rejection(latchkey.proxy({ ...target, connectionId: 'nobody', endpoint: '/echo', method: 'HEAD' }));
    expect(head).toMatchObject({ status: 404, code: 'unknown_connection' });
    const providerHead = await rejection(latchkey.proxy({ ...target, endpoint: '/status/404', method: 'HEAD' }));
    expect(providerHead).toMatchObject({ status: 404, code: 'provider_error' });
  });

  it('refuses a missing target, a body on GET and an endpoint that climbs out of /proxy', async () => {
    await expect(latchkey.get({ ...target, endpoint: '' })).rejects.toThrow(TypeError);
    await expect(latchkey.get({ providerConfigKey: 'api', connectionId: '', endpoint: '/echo' })).rejects.toThrow(/connectionId/);
    await expect(latchkey.proxy({ ...target, endpoint: '/echo', method: 'GET', data: { a: 1 } })).rejects.toThrow(TypeError);
    await expect(latchkey.get({ ...target, endpoint: '/../environment-variables' })).rejects.toThrow(TypeError);
    await expect(latchkey.get({ ...target, endpoint: '/echo/%2E%2e/x' })).rejects.toThrow(TypeError);
    await expect(latchkey.proxy({ ...target, endpoint: '/echo', method: 'TRACE' as 'GET' })).rejects.toThrow(TypeError);
  });
});
