import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { freePort } from '@latchkey/testing';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

const CONSUMER = { key: 'consumer-key', secret: 'consumer-secret' };
const TOKEN = { token: 'user-token', secret: 'user-token-secret' };

let stack: Stack;
let provider: Server;
let providerUrl: string;
const verdicts: Array<{ ok: boolean; nonce: string }> = [];

/** RFC 5849 percent-encoding: everything but the unreserved set. */
const encode = (value: string) => encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** A provider that checks OAuth 1.0a HMAC-SHA1 signatures on its own, as RFC 5849 describes. */
function verify(req: IncomingMessage, body: string, base: string): { ok: boolean; nonce: string } {
  const header = req.headers.authorization ?? '';
  const oauth = Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1]!, decodeURIComponent(match[2]!)]));
  const url = new URL(req.url ?? '/', base);
  const params: Array<[string, string]> = [...url.searchParams];
  if ((req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) params.push(...new URLSearchParams(body));
  for (const [name, value] of Object.entries(oauth)) if (name !== 'oauth_signature' && name !== 'realm') params.push([name, value]);
  const normalized = params
    .map(([name, value]) => [encode(name), encode(value)] as const)
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  const baseString = [req.method, encode(`${url.origin}${url.pathname}`), encode(normalized)].join('&');
  const expected = createHmac('sha1', `${encode(CONSUMER.secret)}&${encode(TOKEN.secret)}`).update(baseString).digest('base64');
  return {
    ok: oauth['oauth_signature'] === expected && oauth['oauth_consumer_key'] === CONSUMER.key && oauth['oauth_token'] === TOKEN.token,
    nonce: oauth['oauth_nonce'] ?? '',
  };
}

beforeAll(async () => {
  const port = await freePort();
  providerUrl = `http://127.0.0.1:${port}`;
  provider = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const verdict = verify(req, body, providerUrl);
      verdicts.push(verdict);
      res.writeHead(verdict.ok ? 200 : 401, { 'content-type': 'application/json' }).end(JSON.stringify(verdict));
    });
  });
  await new Promise<void>((resolve) => provider.listen(port, '127.0.0.1', resolve));
  const providersFile = writeProvidersFile(
    `loopback-oauth1:\n  display_name: Loopback OAuth 1\n  categories: [test]\n  auth_mode: OAUTH1\n  request_url: ${providerUrl}/request\n  authorization_url: ${providerUrl}/authorize\n  token_url: ${providerUrl}/token\n  proxy:\n    base_url: ${providerUrl}/api\n`,
  );
  stack = await startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  const api = (path: string, body: unknown) => http(`${stack.url}${path}`, { method: 'POST', token: stack.bootstrapKey, body });
  await api('/integrations', { provider: 'loopback-oauth1', unique_key: 'oauth1', credentials: { client_id: CONSUMER.key, client_secret: CONSUMER.secret } });
  const created = await api('/connections', {
    provider_config_key: 'oauth1',
    connection_id: 'o1',
    credentials: { type: 'OAUTH1', oauth_token: TOKEN.token, oauth_token_secret: TOKEN.secret, raw: {} },
  });
  expect(created.status).toBe(201);
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  provider?.close();
});

const call = (path: string, init: { method?: string; body?: string; type?: string } = {}) =>
  fetch(`${stack.url}/proxy${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${stack.bootstrapKey}`,
      'connection-id': 'o1',
      'provider-config-key': 'oauth1',
      ...(init.type ? { 'content-type': init.type } : {}),
    },
    ...(init.body === undefined ? {} : { body: init.body }),
  });

describe('OAuth 1.0a through the proxy', () => {
  it('signs requests that an independent verifier accepts, query and form parameters included', async () => {
    expect((await call('/statuses?count=2&screen_name=ada%20l')).status).toBe(200);
    expect((await call('/update', { method: 'POST', type: 'application/x-www-form-urlencoded', body: 'status=Hello%20Ladies%20%2B%20Gentlemen&a=1&a=2' })).status).toBe(200);
    expect((await call('/json', { method: 'POST', type: 'application/json', body: '{"a":1}' })).status).toBe(200);
    expect(verdicts.every((verdict) => verdict.ok)).toBe(true);
    expect(new Set(verdicts.map((verdict) => verdict.nonce)).size).toBe(verdicts.length);
  });
});
