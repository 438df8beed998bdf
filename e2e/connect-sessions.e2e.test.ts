import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Latchkey } from '@latchkey/client';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let latchkey: Latchkey;

const api = (method: string, path: string, body?: unknown, token = stack.bootstrapKey) =>
  http(`${stack.url}${path}`, { method, token, ...(body === undefined ? {} : { body }) });

/**
 * `POST path` exactly as `curl -X POST -H 'Authorization: …'` sends it: no body and neither
 * `Content-Length` nor `Transfer-Encoding` (fetch and node's client both add `Content-Length: 0`).
 */
function postWithoutBody(path: string): Promise<{ status: number; json: any }> {
  const url = new URL(path, stack.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      // Written without ending our side, as curl does: the gateway closes once it has answered.
      socket.write(`POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${stack.bootstrapKey}\r\nConnection: close\r\n\r\n`);
    });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      // The gateway's JSON answers carry a Content-Length: the body is what follows the head.
      const [head = '', body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), json: body ? JSON.parse(body) : undefined });
    });
  });
}

const tagsNamed = (prefix: string, count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, 'v']));

beforeAll(async () => {
  stack = await startStack();
  latchkey = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  const provider = (await api('GET', '/providers')).json.data.find((entry: { auth_mode: string }) => entry.auth_mode === 'API_KEY');
  await api('POST', '/integrations', { provider: provider.name, unique_key: 'keys' });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('connect sessions', () => {
  it('are created with a prefixed token, a connect link and a 30-minute expiry', async () => {
    const created = await api('POST', '/connect/sessions', { tags: { End_User_Id: 'u-1' }, allowed_integrations: ['keys'] });
    expect(created.status).toBe(201);
    const { token, connect_link: link, expires_at: expiresAt } = created.json.data;
    expect(token).toMatch(/^lk_cs_[A-Za-z0-9_-]{43}$/);
    expect(link).toBe(`${stack.url}/connect?session_token=${token}`);
    expect(Date.parse(expiresAt) - Date.now()).toBeGreaterThan(29 * 60_000);
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(30 * 60_000);

    const session = await api('GET', '/connect/session', undefined, token);
    expect(session.status).toBe(200);
    expect(session.json.data).toMatchObject({ tags: { end_user_id: 'u-1' }, allowed_integrations: ['keys'], reconnect: null });
    expect(JSON.stringify(session.json)).not.toContain(token);
  });

  it('authorize the end-user flow and nothing else', async () => {
    const { token } = (await api('POST', '/connect/sessions', {})).json.data;
    const onCustomerRoute = await api('GET', '/connections', undefined, token);
    expect(onCustomerRoute.status).toBe(401);
    expect(onCustomerRoute.json.error.code).toBe('unknown_api_key');
    const keyOnSessionRoute = await api('GET', '/connect/session');
    expect(keyOnSessionRoute.status).toBe(401);
    expect(keyOnSessionRoute.json.error.code).toBe('unknown_connect_session_token');
  });

  it('end when deleted', async () => {
    const { token } = (await api('POST', '/connect/sessions', {})).json.data;
    expect((await api('DELETE', '/connect/session', undefined, token)).status).toBe(204);
    const after = await api('GET', '/connect/session', undefined, token);
    expect(after.status).toBe(401);
    expect(after.json.error.code).toBe('unknown_connect_session_token');
    // The token as a query parameter, as every connect-flow route takes it.
    const other = (await api('POST', '/connect/sessions', {})).json.data.token as string;
    expect((await http(`${stack.url}/connect/session?connect_session_token=${other}`, { method: 'DELETE' })).status).toBe(204);
    expect((await http(`${stack.url}/connect/session?connect_session_token=${other}`)).status).toBe(401);
  });

  it('answer one token at most CONNECT_SESSION_REQUESTS_PER_MINUTE times a minute (120), then 429 with Retry-After; other sessions go on', async () => {
    const { token } = (await api('POST', '/connect/sessions', {})).json.data;
    let answered = 0;
    let refused: Awaited<ReturnType<typeof api>> | undefined;
    // Twice the limit, were the minute to turn during the loop.
    while (refused === undefined && answered < 260) {
      const response = await api('GET', '/connect/session', undefined, token);
      if (response.status === 200) answered++;
      else refused = response;
    }
    expect(answered).toBeGreaterThanOrEqual(120);
    expect(answered).toBeLessThanOrEqual(240);
    expect([refused?.status, refused?.json.error.code]).toEqual([429, 'too_many_requests']);
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const other = (await api('POST', '/connect/sessions', {})).json.data.token as string;
    expect((await api('GET', '/connect/session', undefined, other)).status).toBe(200);
  }, 60_000);

  it('are created from a request with no body at all, as from {}; a body that is there but not JSON is still refused', async () => {
    const bare = await postWithoutBody('/connect/sessions');
    expect(bare.status).toBe(201);
    expect(bare.json.data.token).toMatch(/^lk_cs_/);
    expect((await api('GET', '/connect/session', undefined, bare.json.data.token)).json.data).toMatchObject({ tags: {}, allowed_integrations: null });
    // fetch without a body sends `Content-Length: 0`; an empty JSON body is `{}` too.
    const empty = await fetch(`${stack.url}/connect/sessions`, { method: 'POST', headers: { authorization: `Bearer ${stack.bootstrapKey}` } });
    expect(empty.status).toBe(201);
    const emptyJson = await fetch(`${stack.url}/connect/sessions`, { method: 'POST', headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json' }, body: '' });
    expect(emptyJson.status).toBe(201);

    const send = (type: string, text: string) => fetch(`${stack.url}/connect/sessions`, { method: 'POST', headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': type }, body: text });
    const notJson = await send('application/json', 'tags=1');
    expect([notJson.status, ((await notJson.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_json']);
    const text = await send('text/plain', '{}');
    expect([text.status, ((await text.json()) as { error: { code: string } }).error.code]).toEqual([415, 'invalid_content_type']);
    const nullBody = await send('application/json', 'null');
    expect([nullBody.status, ((await nullBody.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_body']);

    // A route whose body has required fields still wants a body.
    const reconnect = await postWithoutBody('/connect/sessions/reconnect');
    expect([reconnect.status, reconnect.json.error.code]).toEqual([400, 'invalid_body']);
  });

  it('refuse bad input with the documented codes', async () => {
    expect((await api('POST', '/connect/sessions', { allowed_integrations: ['nope'] })).json.error.code).toBe('unknown_provider_config');
    expect((await api('POST', '/connect/sessions', { integrations_config_defaults: { nope: { connection_config: {} } } })).json.error.code).toBe('unknown_provider_config');
    const unknownKey = await api('POST', '/connect/sessions', { bogus: 1 });
    expect(unknownKey.status).toBe(400);
    expect(unknownKey.json.error.code).toBe('invalid_body');
    expect((await api('POST', '/connect/sessions', { overrides: { keys: { docs_connect: 'not a url' } } })).status).toBe(400);
    // The Connect UI links to it: a web page only, never a script to run (the page's CSP would stop one; this stops it first).
    for (const docs_connect of ['javascript:alert(1)', 'data:text/html,<p>x</p>', 'file:///etc/passwd']) {
      const refused = await api('POST', '/connect/sessions', { overrides: { keys: { docs_connect } } });
      expect({ status: refused.status, path: refused.json.error.errors?.[0]?.path }).toEqual({ status: 400, path: 'overrides.keys.docs_connect' });
    }
    const scoped = (await http(`${stack.url}/admin/environments/dev/api-keys`, { method: 'POST', token: stack.adminToken, body: { display_name: 'no', scopes: ['environment:proxy'] } })).json.data.secret;
    const forbidden = await api('POST', '/connect/sessions', {}, scoped);
    expect(forbidden.status).toBe(403);
    expect(forbidden.json.error.message).toContain('environment:connect_sessions:write');
  });

  it('reconnect only connections made through a connect session', async () => {
    await api('POST', '/connections', { provider_config_key: 'keys', connection_id: 'imported', credentials: { type: 'API_KEY', apiKey: 'k' } });
    const imported = await api('POST', '/connect/sessions/reconnect', { connection_id: 'imported', integration_id: 'keys' });
    expect(imported.status).toBe(400);
    expect(imported.json.error.errors[0].path).toBe('connection_id');
    const missing = await api('POST', '/connect/sessions/reconnect', { connection_id: 'ghost', integration_id: 'keys' });
    expect(missing.json.error.code).toBe('unknown_connection');
  });
});

describe('the client', () => {
  it('creates sessions and waits for an end user connection', async () => {
    const { data } = await latchkey.createConnectSession({ tags: { end_user_id: 'u-9' }, allowed_integrations: ['keys'] });
    expect(data.connect_link).toContain(data.token);
    await expect(latchkey.waitForConnection('keys', 'u-9', { intervalMs: 50, attempts: 3 })).rejects.toMatchObject({ code: 'timeout' });
    setTimeout(() => {
      void api('POST', '/connections', { provider_config_key: 'keys', connection_id: 'late', tags: { end_user_id: 'u-9' }, credentials: { type: 'API_KEY', apiKey: 'k' } });
    }, 150);
    const found = await latchkey.waitForConnection('keys', 'u-9', { intervalMs: 100, attempts: 30 });
    expect(found.connection_id).toBe('late');
    await expect(latchkey.createReconnectSession({ connection_id: 'late', integration_id: 'keys' })).rejects.toMatchObject({ status: 400 });
  });
});

describe('form flows with a session token', () => {
  const save = (path: string, token: string, body: unknown) => http(`${stack.url}${path}?connect_session_token=${token}`, { method: 'POST', body });

  it('create a connection with a server-chosen id, the session tags and a fresh key', async () => {
    const { token } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'form-user' }, allowed_integrations: ['keys'] })).json.data;
    const missing = await save('/api-auth/api-key/keys', token, {});
    expect(missing.status).toBe(400);
    expect(missing.json.error.errors.map((item: { path: string }) => item.path)).toContain('credentials.apiKey');

    const saved = await save('/api-auth/api-key/keys', token, { apiKey: 'end-user-key' });
    expect(saved.status).toBe(200);
    expect(saved.json).toEqual({ connectionId: expect.stringMatching(/^[0-9a-f-]{36}$/), providerConfigKey: 'keys' });
    const connection = await api('GET', `/connections/${saved.json.connectionId}?provider_config_key=keys`);
    expect(connection.json).toMatchObject({ tags: { end_user_id: 'form-user' }, credentials: { type: 'API_KEY', apiKey: 'end-user-key' } });

    // A reconnect session replaces the credentials of that same connection.
    const reconnect = (await api('POST', '/connect/sessions/reconnect', { connection_id: saved.json.connectionId, integration_id: 'keys' })).json.data;
    const replaced = await save('/api-auth/api-key/keys', reconnect.token, { apiKey: 'rotated-key' });
    expect(replaced.json.connectionId).toBe(saved.json.connectionId);
    const after = await api('GET', `/connections/${saved.json.connectionId}?provider_config_key=keys`);
    expect(after.json.credentials.apiKey).toBe('rotated-key');
  });

  it('create at most 20 connections each: a link in the wrong hands cannot fill the environment', async () => {
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data;
    for (let made = 0; made < 20; made++) expect((await save('/api-auth/api-key/keys', token, { apiKey: `key-${made}` })).status).toBe(200);
    const refused = await save('/api-auth/api-key/keys', token, { apiKey: 'one-too-many' });
    expect([refused.status, refused.json.error.code]).toEqual([429, 'too_many_requests']);
    // A new session creates again.
    const { token: next } = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data;
    expect((await save('/api-auth/api-key/keys', next, { apiKey: 'next-session' })).status).toBe(200);
  });

  it('refuse integrations the session does not allow, other types, and unknown tokens', async () => {
    await api('POST', '/integrations', { provider: (await api('GET', '/providers')).json.data.find((entry: { auth_mode: string }) => entry.auth_mode === 'API_KEY').name, unique_key: 'other' });
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data;
    expect((await save('/api-auth/api-key/other', token, { apiKey: 'k' })).status).toBe(403);
    expect((await save('/api-auth/basic/keys', token, { username: 'u', password: 'p' })).json.error.errors[0].path).toBe('credentials.type');
    expect((await save('/auth/oauth2/keys', token, {})).json.error.code).toBe('invalid_uri_params');
    const unknown = await save('/api-auth/api-key/keys', 'lk_cs_nope', { apiKey: 'k' });
    expect(unknown.status).toBe(401);
    expect(unknown.json.error.code).toBe('unknown_connect_session_token');
  });
});

describe('reconnect sessions and tags', () => {
  const save = (token: string, apiKey: string) => http(`${stack.url}/api-auth/api-key/keys?connect_session_token=${token}`, { method: 'POST', body: { apiKey } });
  const read = async (connectionId: string) => (await api('GET', `/connections/${connectionId}?provider_config_key=keys`)).json;

  /** A connection made through a session carrying `tags`. */
  async function sessionConnection(tags: Record<string, string>): Promise<string> {
    const { token } = (await api('POST', '/connect/sessions', { tags, allowed_integrations: ['keys'] })).json.data;
    const saved = await save(token, 'first-key');
    expect(saved.status).toBe(200);
    return saved.json.connectionId as string;
  }

  it('are refused when their tags and the connection\'s would make more than 10, counting a key both have once', async () => {
    const connectionId = await sessionConnection(tagsNamed('old', 6));
    const refused = await api('POST', '/connect/sessions/reconnect', { connection_id: connectionId, integration_id: 'keys', tags: tagsNamed('new', 5) });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('invalid_body');
    expect(refused.json.error.errors).toEqual([expect.objectContaining({ path: 'tags' })]);
    expect(refused.json.error.message).toMatch(/11 tags, more than 10/);
    // Keys are lower-cased before they are counted: OLD0 is the connection's old0.
    const overlapping = await api('POST', '/connect/sessions/reconnect', { connection_id: connectionId, integration_id: 'keys', tags: { ...tagsNamed('new', 4), OLD0: 'changed' } });
    expect(overlapping.status).toBe(201);
    expect((await save(overlapping.json.data.token, 'second-key')).status).toBe(200);
    expect(Object.keys((await read(connectionId)).tags)).toHaveLength(10);
    expect((await read(connectionId)).tags.old0).toBe('changed');
  });

  it('end the flow with an error, storing nothing, when the connection gained tags since the session was made', async () => {
    const connectionId = await sessionConnection(tagsNamed('old', 2));
    const { token } = (await api('POST', '/connect/sessions/reconnect', { connection_id: connectionId, integration_id: 'keys', tags: tagsNamed('new', 4) })).json.data;
    const patched = await api('PATCH', `/connections/${connectionId}?provider_config_key=keys`, { tags: tagsNamed('later', 8) });
    expect(patched.status).toBe(200);

    const refused = await save(token, 'refused-key');
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('invalid_body');
    expect(refused.json.error.message).toMatch(/not reconnected.*more than 10/);
    const after = await read(connectionId);
    expect(after.tags).toEqual(tagsNamed('later', 8));
    expect(after.credentials.apiKey).toBe('first-key');
  });
});
