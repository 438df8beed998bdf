import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, randomBytes } from 'node:crypto';
import { OAUTH_SERVER_DEFAULTS, startOAuthServer, type TestOAuthServer } from './oauth-server.js';

const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const DEFAULTS = OAUTH_SERVER_DEFAULTS;

let oauth: TestOAuthServer;

beforeAll(async () => {
  oauth = await startOAuthServer();
});

afterEach(() => {
  oauth.setOptions(DEFAULTS);
  oauth.stats.reset();
});

afterAll(async () => {
  await oauth?.close();
});

interface TokenReply {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

type ClientAuth = { basic: [string, string] } | { body: [string, string] } | { none: true };

const testClient: ClientAuth = { basic: ['test-client', 'test-secret'] };

function basicHeader(clientId: string, secret: string): string {
  const encode = (value: string): string => encodeURIComponent(value).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(secret)}`).toString('base64')}`;
}

async function requestToken(server: TestOAuthServer, params: Record<string, string>, auth: ClientAuth = testClient): Promise<TokenReply> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  const form = new URLSearchParams(params);
  if ('basic' in auth) headers['authorization'] = basicHeader(...auth.basic);
  if ('body' in auth) {
    form.set('client_id', auth.body[0]);
    form.set('client_secret', auth.body[1]);
  }
  const response = await fetch(server.tokenUrl, { method: 'POST', headers, body: form });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Runs /authorize and returns where it redirected to. */
async function authorize(server: TestOAuthServer, params: Record<string, string>): Promise<URL> {
  const response = await fetch(`${server.authorizationUrl}?${new URLSearchParams(params)}`, { redirect: 'manual' });
  expect(response.status).toBe(302);
  return new URL(response.headers.get('location') ?? 'missing:');
}

/** A code for test-client with an S256 challenge, and the verifier that redeems it. */
async function codeWithPkce(server: TestOAuthServer = oauth, clientId = 'test-client'): Promise<{ code: string; verifier: string }> {
  const { verifier, challenge } = pkcePair();
  const location = await authorize(server, {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    state: 'st',
    scope: 'read write',
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  return { code: location.searchParams.get('code') ?? '', verifier };
}

async function callWithToken(url: string, accessToken: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${accessToken}` } });
}

async function exchange(code: string, verifier: string): Promise<TokenReply> {
  return requestToken(oauth, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier });
}

describe('authorization code with PKCE', () => {
  it('redirects with a code and the state, then exchanges the code for working tokens', async () => {
    const { verifier, challenge } = pkcePair();
    const location = await authorize(oauth, {
      response_type: 'code',
      client_id: 'test-client',
      redirect_uri: REDIRECT_URI,
      state: 'xyz 123',
      scope: 'read write',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(location.searchParams.get('state')).toBe('xyz 123');
    const code = location.searchParams.get('code');
    expect(code).toEqual(expect.any(String));

    const reply = await exchange(code ?? '', verifier);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.body).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: 3600,
      refresh_token: expect.any(String),
      scope: 'read write',
    });

    const userinfo = await callWithToken(oauth.userinfoUrl, reply.body['access_token'] as string);
    expect(userinfo.status).toBe(200);
    expect(await userinfo.json()).toMatchObject({ sub: 'test-user', client_id: 'test-client', scope: 'read write', path: '/userinfo', method: 'GET' });
    expect(oauth.stats.authorizeRequests).toBe(1);
    expect(oauth.stats.grants.authorization_code).toBe(1);
    expect(oauth.stats.issuedAccessTokens()).toEqual([reply.body['access_token']]);
    expect(oauth.stats.issuedRefreshTokens()).toEqual([reply.body['refresh_token']]);
  });

  it('refuses a wrong verifier, a missing verifier and a different redirect_uri, then redeems the code once', async () => {
    const { code, verifier } = await codeWithPkce();
    const wrong = await exchange(code, pkcePair().verifier);
    expect(wrong.status).toBe(400);
    expect(wrong.body['error']).toBe('invalid_grant');
    const missing = await requestToken(oauth, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI });
    expect(missing.body['error']).toBe('invalid_grant');
    const otherRedirect = await requestToken(oauth, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: 'http://127.0.0.1:9/elsewhere',
      code_verifier: verifier,
    });
    expect(otherRedirect.body['error']).toBe('invalid_grant');

    expect((await exchange(code, verifier)).status).toBe(200);
    const reused = await exchange(code, verifier);
    expect(reused.status).toBe(400);
    expect(reused.body['error']).toBe('invalid_grant');
  });

  it('lets codes expire', async () => {
    oauth.setOptions({ codeTtlMs: 1 });
    const { code, verifier } = await codeWithPkce();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await exchange(code, verifier)).body['error']).toBe('invalid_grant');
  });

  it('refuses a code issued to another client', async () => {
    const other = oauth.addClient();
    const { code, verifier } = await codeWithPkce(oauth, other.client_id);
    const reply = await exchange(code, verifier);
    expect(reply.body['error']).toBe('invalid_grant');
  });

  it('works without PKCE unless required, and only with S256', async () => {
    const plain = await authorize(oauth, { response_type: 'code', client_id: 'test-client', redirect_uri: REDIRECT_URI });
    const code = plain.searchParams.get('code') ?? '';
    expect((await requestToken(oauth, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI })).status).toBe(200);

    const plainMethod = await authorize(oauth, {
      response_type: 'code',
      client_id: 'test-client',
      redirect_uri: REDIRECT_URI,
      code_challenge: 'abc',
      code_challenge_method: 'plain',
    });
    expect(plainMethod.searchParams.get('error')).toBe('invalid_request');

    oauth.setOptions({ requirePkce: true });
    const required = await authorize(oauth, { response_type: 'code', client_id: 'test-client', redirect_uri: REDIRECT_URI, state: 's' });
    expect(required.searchParams.get('error')).toBe('invalid_request');
    expect(required.searchParams.get('state')).toBe('s');
  });

  it('redirects with access_denied when consent is refused, and unsupported_response_type for implicit', async () => {
    oauth.setOptions({ denyAuthorization: true });
    const denied = await authorize(oauth, { response_type: 'code', client_id: 'test-client', redirect_uri: REDIRECT_URI, state: 'd' });
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('state')).toBe('d');
    expect(denied.searchParams.has('code')).toBe(false);

    oauth.setOptions({ denyAuthorization: false });
    const implicit = await authorize(oauth, { response_type: 'token', client_id: 'test-client', redirect_uri: REDIRECT_URI });
    expect(implicit.searchParams.get('error')).toBe('unsupported_response_type');
  });

  it('answers 400 without redirecting for an unknown client or an unacceptable redirect_uri', async () => {
    const registered = oauth.addClient({ redirect_uris: ['https://app.example/callback'] });
    const attempts: Record<string, string>[] = [
      { client_id: 'nobody', redirect_uri: REDIRECT_URI },
      { client_id: 'test-client', redirect_uri: 'https://evil.example/callback' },
      { client_id: 'test-client' },
      { client_id: registered.client_id, redirect_uri: 'https://app.example/callback/extra' },
    ];
    for (const attempt of attempts) {
      const response = await fetch(`${oauth.authorizationUrl}?${new URLSearchParams({ response_type: 'code', ...attempt })}`, {
        redirect: 'manual',
      });
      expect(response.status).toBe(400);
      expect(response.headers.get('location')).toBeNull();
      expect(await response.json()).toMatchObject({ error: 'invalid_request' });
    }
    // A registered URI need not be loopback, and a sole registered URI may be left implicit.
    const exact = await authorize(oauth, { response_type: 'code', client_id: registered.client_id, redirect_uri: 'https://app.example/callback' });
    expect(exact.origin).toBe('https://app.example');
    const implicit = await authorize(oauth, { response_type: 'code', client_id: registered.client_id });
    expect(implicit.searchParams.has('code')).toBe(true);
  });
});

describe('refresh tokens', () => {
  async function initialTokens(): Promise<{ accessToken: string; refreshToken: string }> {
    const { code, verifier } = await codeWithPkce();
    const reply = await exchange(code, verifier);
    return { accessToken: reply.body['access_token'] as string, refreshToken: reply.body['refresh_token'] as string };
  }

  it('rotates: the new refresh token works, the old one gives invalid_grant', async () => {
    const first = await initialTokens();
    const refreshed = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: first.refreshToken });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body['refresh_token']).toEqual(expect.any(String));
    expect(refreshed.body['refresh_token']).not.toBe(first.refreshToken);
    expect(refreshed.body['access_token']).not.toBe(first.accessToken);
    expect(refreshed.body['scope']).toBe('read write');

    const reused = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: first.refreshToken });
    expect(reused.status).toBe(400);
    expect(reused.body['error']).toBe('invalid_grant');

    const again = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshed.body['refresh_token'] as string });
    expect(again.status).toBe(200);
    expect(oauth.stats.grants.refresh_token).toBe(3);
  });

  it('keeps the refresh token when rotation is off, and omits it when asked', async () => {
    oauth.setOptions({ rotateRefreshTokens: false });
    const { refreshToken } = await initialTokens();
    const kept = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken });
    expect(kept.body['refresh_token']).toBe(refreshToken);

    oauth.setOptions({ rotateRefreshTokens: true, omitRefreshTokenOnRefresh: true });
    const omitted = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken });
    expect(omitted.status).toBe(200);
    expect(omitted.body).not.toHaveProperty('refresh_token');
    expect((await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken })).status).toBe(200);
  });

  it('refuses a refresh token of another client, a wider scope and revoked refresh tokens', async () => {
    const { refreshToken } = await initialTokens();
    const other = oauth.addClient();
    const stolen = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken }, { body: [other.client_id, other.client_secret] });
    expect(stolen.body['error']).toBe('invalid_grant');

    const wider = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken, scope: 'read admin' });
    expect(wider.body['error']).toBe('invalid_scope');
    const narrower = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken, scope: 'read' });
    expect(narrower.body['scope']).toBe('read');

    oauth.revokeRefreshTokens();
    const revoked = await requestToken(oauth, { grant_type: 'refresh_token', refresh_token: narrower.body['refresh_token'] as string });
    expect(revoked.body['error']).toBe('invalid_grant');
  });

  it('holds concurrent refreshes open with tokenDelayMs; with rotation only one wins', async () => {
    const { refreshToken } = await initialTokens();
    oauth.stats.reset();
    oauth.setOptions({ tokenDelayMs: 150 });
    const started = Date.now();
    const both = Promise.all([
      requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken }),
      requestToken(oauth, { grant_type: 'refresh_token', refresh_token: refreshToken }),
    ]);
    await waitFor(() => oauth.stats.tokenRequests === 2);
    expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([undefined, undefined]);
    const replies = await both;
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(replies.map((reply) => reply.status).sort()).toEqual([200, 400]);
  });
});

describe('client credentials and client authentication', () => {
  it('issues an access token without a refresh token, with client_id as subject', async () => {
    const reply = await requestToken(oauth, { grant_type: 'client_credentials', scope: 'reports' }, { body: ['test-client', 'test-secret'] });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 3600, scope: 'reports' });
    const userinfo = await callWithToken(oauth.userinfoUrl, reply.body['access_token'] as string);
    expect(await userinfo.json()).toMatchObject({ sub: 'test-client', scope: 'reports' });
    expect(oauth.stats.grants.client_credentials).toBe(1);
    expect(oauth.stats.tokenRequestLog[0]).toMatchObject({ clientAuth: 'body', clientId: 'test-client', grantType: 'client_credentials', status: 200 });
  });

  it('accepts Basic and body credentials by default and records which was used', async () => {
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, testClient)).status).toBe(200);
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, { body: ['test-client', 'test-secret'] })).status).toBe(200);
    expect(oauth.stats.tokenRequestLog.map((record) => record.clientAuth)).toEqual(['basic', 'body']);
    expect(oauth.stats.tokenRequestLog[1]?.body).toEqual({ grant_type: 'client_credentials', client_id: 'test-client', client_secret: 'test-secret' });
  });

  it('decodes form-encoded Basic credentials', async () => {
    const odd = oauth.addClient({ client_id: 'odd client', client_secret: 's3cret:+/ä' });
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, { basic: [odd.client_id, odd.client_secret] })).status).toBe(200);
  });

  it('answers 401 invalid_client for a wrong secret, an unknown client and no credentials', async () => {
    const attempts: ClientAuth[] = [
      { basic: ['test-client', 'wrong'] },
      { body: ['test-client', 'wrong'] },
      { body: ['nobody', 'test-secret'] },
      { none: true },
    ];
    for (const auth of attempts) {
      const reply = await requestToken(oauth, { grant_type: 'client_credentials' }, auth);
      expect(reply.status).toBe(401);
      expect(reply.body).toEqual({ error: 'invalid_client', error_description: expect.any(String) });
      expect(reply.headers.get('www-authenticate')).toMatch(/^Basic/);
    }
  });

  it('enforces one authentication style when configured', async () => {
    oauth.setOptions({ clientAuth: 'basic' });
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, testClient)).status).toBe(200);
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, { body: ['test-client', 'test-secret'] })).body['error']).toBe(
      'invalid_client',
    );
    oauth.setOptions({ clientAuth: 'body' });
    expect((await requestToken(oauth, { grant_type: 'client_credentials' }, { body: ['test-client', 'test-secret'] })).status).toBe(200);
    const basic = await requestToken(oauth, { grant_type: 'client_credentials' }, testClient);
    expect(basic.status).toBe(401);
    expect(basic.body['error']).toBe('invalid_client');
  });

  it('refuses two authentication methods at once, bad grant types and a non-form body', async () => {
    const both = await fetch(oauth.tokenUrl, {
      method: 'POST',
      headers: { authorization: basicHeader('test-client', 'test-secret') },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'test-client', client_secret: 'test-secret' }),
    });
    expect(both.status).toBe(400);
    expect(await both.json()).toMatchObject({ error: 'invalid_request' });

    const unsupported = await requestToken(oauth, { grant_type: 'password', username: 'u', password: 'p' });
    expect(unsupported).toMatchObject({ status: 400, body: { error: 'unsupported_grant_type' } });
    const missing = await requestToken(oauth, {});
    expect(missing).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    expect(oauth.stats.grants.other).toBe(2);

    const json = await fetch(oauth.tokenUrl, {
      method: 'POST',
      headers: { authorization: basicHeader('test-client', 'test-secret'), 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({ error: 'invalid_request' });
  });
});

describe('token responses', () => {
  it('merges extraTokenFields and honours expiresIn', async () => {
    oauth.setOptions({ expiresIn: 120, extraTokenFields: { id_token: 'x.y.z', token_type: 'bearer' } });
    const reply = await requestToken(oauth, { grant_type: 'client_credentials' });
    expect(reply.body).toMatchObject({ expires_in: 120, id_token: 'x.y.z', token_type: 'bearer' });
  });

  it('forces the next answers with failNextToken, then behaves again', async () => {
    oauth.failNextToken(503, { error: 'temporarily_unavailable' }, { 'retry-after': '2' });
    oauth.failNextToken(500, '<html>oops</html>');
    const first = await requestToken(oauth, { grant_type: 'client_credentials' });
    expect(first).toMatchObject({ status: 503, body: { error: 'temporarily_unavailable' } });
    expect(first.headers.get('retry-after')).toBe('2');
    const second = await fetch(oauth.tokenUrl, {
      method: 'POST',
      headers: { authorization: basicHeader('test-client', 'test-secret') },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    });
    expect(second.status).toBe(500);
    expect(await second.text()).toBe('<html>oops</html>');
    expect((await requestToken(oauth, { grant_type: 'client_credentials' })).status).toBe(200);
    expect(oauth.stats.tokenRequests).toBe(3);
  });

  it('resets stats without invalidating tokens', async () => {
    const reply = await requestToken(oauth, { grant_type: 'client_credentials' });
    oauth.stats.reset();
    expect(oauth.stats).toMatchObject({ tokenRequests: 0, tokenRequestLog: [], grants: { client_credentials: 0 } });
    expect(oauth.stats.issuedAccessTokens()).toEqual([]);
    expect((await callWithToken(oauth.userinfoUrl, reply.body['access_token'] as string)).status).toBe(200);
  });
});

describe('protected resources', () => {
  async function accessToken(): Promise<string> {
    return (await requestToken(oauth, { grant_type: 'client_credentials' })).body['access_token'] as string;
  }

  it('echoes requests under /api/ for a valid token', async () => {
    const token = await accessToken();
    const response = await callWithToken(`${oauth.url}/api/v1/things?limit=5`, token, {
      method: 'POST',
      headers: { 'x-custom': 'yes' },
      body: 'hello',
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      sub: 'test-client',
      token,
      path: '/api/v1/things',
      method: 'POST',
      query: { limit: '5' },
      headers: { 'x-custom': 'yes', authorization: `Bearer ${token}` },
      body: 'hello',
    });
  });

  it('answers 401 without a token, with an unknown, revoked or expired token', async () => {
    const none = await fetch(oauth.userinfoUrl);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="oauth"');

    const unknown = await callWithToken(oauth.userinfoUrl, 'at-made-up');
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toContain('error="invalid_token"');

    const token = await accessToken();
    expect((await callWithToken(oauth.userinfoUrl, token)).status).toBe(200);
    oauth.revokeAccessTokens();
    expect((await callWithToken(oauth.userinfoUrl, token)).status).toBe(401);

    oauth.setOptions({ expiresIn: 0 });
    expect((await callWithToken(`${oauth.url}/api/x`, await accessToken())).status).toBe(401);
  });

  it('revokes a token through /revoke (RFC 7009)', async () => {
    const token = await accessToken();
    const response = await fetch(oauth.revocationUrl, {
      method: 'POST',
      headers: { authorization: basicHeader('test-client', 'test-secret') },
      body: new URLSearchParams({ token }),
    });
    expect(response.status).toBe(200);
    expect((await callWithToken(oauth.userinfoUrl, token)).status).toBe(401);
  });
});

describe('server setup', () => {
  it('publishes RFC 8414 metadata', async () => {
    const response = await fetch(`${oauth.url}/.well-known/oauth-authorization-server`);
    expect(await response.json()).toMatchObject({
      issuer: oauth.url,
      authorization_endpoint: oauth.authorizationUrl,
      token_endpoint: oauth.tokenUrl,
      code_challenge_methods_supported: ['S256'],
    });
  });

  it('takes its clients and settings at start, and runs several servers side by side', async () => {
    const custom = await startOAuthServer({
      clients: [{ client_id: 'app', client_secret: 'app-secret', redirect_uris: [REDIRECT_URI] }],
      clientAuth: 'body',
      expiresIn: 60,
    });
    try {
      expect(custom.url).not.toBe(oauth.url);
      expect(custom.clients).toEqual([{ client_id: 'app', client_secret: 'app-secret', redirect_uris: [REDIRECT_URI] }]);
      const { code, verifier } = await codeWithPkce(custom, 'app');
      const reply = await requestToken(
        custom,
        { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier },
        { body: ['app', 'app-secret'] },
      );
      expect(reply).toMatchObject({ status: 200, body: { expires_in: 60 } });
      expect((await requestToken(custom, { grant_type: 'client_credentials' })).status).toBe(401);
    } finally {
      await custom.close();
    }
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
