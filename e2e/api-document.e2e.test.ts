import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstream } from '@nats-io/jetstream';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { z } from 'zod';
import { deployWithCli, eventually, FUNCTIONS_DIR } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { createScopedKey, http, startStack, type Stack } from './support/stack.js';

/**
 * Shapes the API document gives, exactly, and the leniency clients written for the document's
 * peer API rely on: unknown query parameters on read routes and empty optional headers.
 */
let stack: Stack;
let upstream: TestUpstreamApi;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  upstream = await startUpstreamApi();
  stack = await startStack({
    // `refused-api` is on a loopback address the operator did not allow.
    env: { PROVIDERS_FILE: writeProvidersFile(`${apiKeyProviderYaml(upstream.url)}${apiKeyProviderYaml('http://127.0.0.9:9', 'refused-api')}`), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    // Two vaults: a connection's last_fetched_at must read the same whichever answers.
    replicas: { 'credential-vault': 2 },
  });
  await seedApiKeyConnection(stack, 'api', 'c1', 'key-1');
  // The actions of e2e/functions/api, for the answers of POST /action/trigger and GET /action/{id}.
  await deployWithCli(FUNCTIONS_DIR, stack);
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
});

describe('error bodies the API document gives per endpoint', () => {
  it('POST /connections/metadata answers its errors with a message (and the usual envelope beside it)', async () => {
    const invalid = await api('POST', '/connections/metadata', { connection_id: 'c1', provider_config_key: 'api' });
    expect(invalid.status).toBe(400);
    expect(invalid.json).toEqual({ message: expect.any(String), error: expect.objectContaining({ code: 'invalid_body' }) });
    const unknown = await api('POST', '/connections/metadata', { connection_id: 'nobody', provider_config_key: 'api', metadata: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.json.message).toEqual(expect.any(String));
    const notJson = await fetch(`${stack.url}/connections/metadata`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json' },
      body: '{"connection_id":',
    });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { message?: unknown }).message).toEqual(expect.any(String));
  });

  it('POST /sync/start answers its errors with a message', async () => {
    const invalid = await api('POST', '/sync/start', { provider_config_key: 'api' });
    expect(invalid.status).toBe(400);
    expect(invalid.json).toEqual({ message: expect.any(String), error: expect.objectContaining({ code: 'invalid_body' }) });
    const unauthenticated = await http(`${stack.url}/sync/start`, { method: 'POST', token: 'lk_sk_nobody', body: { provider_config_key: 'api', syncs: [] } });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.json.message).toEqual(expect.any(String));
  });

  it('other routes keep the one error envelope', async () => {
    const invalid = await api('POST', '/integrations', {});
    expect(invalid.status).toBe(400);
    expect(Object.keys(invalid.json)).toEqual(['error']);
  });
});

describe('answers as the API document gives them', () => {
  interface Response { content?: Record<string, { schema: Record<string, unknown> }> }
  let document: { paths: Record<string, Record<string, { responses: Record<string, Response> }>>; components: { schemas: Record<string, Record<string, unknown>> } };

  beforeAll(async () => {
    document = (await http(`${stack.url}/openapi.json`)).json;
  });

  /**
   * A real answer against the body the served document gives its operation and status: that
   * status must be listed, and the body must match, with no key the document does not name.
   */
  function expectDocumented(operation: string, answer: { status: number; json: unknown }) {
    const [method = '', path = ''] = operation.split(' ');
    const response = document.paths[path]?.[method.toLowerCase()]?.responses[String(answer.status)];
    expect([operation, answer.status, response?.content ? 'documented' : 'not documented']).toEqual([operation, answer.status, 'documented']);
    const given = response!.content!['application/json']!.schema;
    const ref = typeof given['$ref'] === 'string' ? given['$ref'].replace('#/components/schemas/', '') : undefined;
    const schema = ref === undefined ? given : document.components.schemas[ref]!;
    const checked = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(answer.json);
    expect([operation, answer.status, checked.error?.issues ?? []]).toEqual([operation, answer.status, []]);
  }

  it('GET /integrations and GET /integrations/{uniqueKey}, with and without the webhook data and credentials', async () => {
    expectDocumented('GET /integrations', await api('GET', '/integrations'));
    expectDocumented('GET /integrations/{uniqueKey}', await api('GET', '/integrations/api'));
    const full = await api('GET', '/integrations/api?include=webhook,credentials');
    expect(Object.keys(full.json.data)).toEqual(expect.arrayContaining(['webhook_url', 'webhookSecret', 'credentials']));
    expectDocumented('GET /integrations/{uniqueKey}', full);
    const reader = await createScopedKey(stack, ['environment:integrations:read']);
    expectDocumented('GET /integrations/{uniqueKey}', await http(`${stack.url}/integrations/api?include=webhook`, { token: reader }));
  });

  it('the deprecated GET /connection/{connectionId}: the query parameters it lists, and its legacy 400 and 404 bodies', async () => {
    const cases: Array<[path: string, status: number]> = [
      ['/connection/c1?provider_config_key=api&force_refresh=false&refresh_token=true&refresh_vendor_app_jwt_token=false', 200],
      ['/connection/c1', 400],
      ['/connection/c1?provider_config_key=api&force_refresh=maybe', 400],
      ['/connection/nobody?provider_config_key=api', 404],
    ];
    for (const [path, status] of cases) {
      const answer = await api('GET', path);
      expect([path, answer.status]).toEqual([path, status]);
      expectDocumented('GET /connection/{connectionId}', answer);
    }
  });

  it('POST /action/trigger run now (200) and queued (202), and GET /action/{id} while it runs (202) and once done (200)', async () => {
    const trigger = async (input: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${stack.url}/action/trigger`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'c1', 'provider-config-key': 'api', ...headers },
        body: JSON.stringify(input),
      });
      return { status: response.status, json: (await response.json()) as any };
    };
    const now = await trigger({ action_name: 'double', input: { n: 2 } });
    expect(now).toEqual({ status: 200, json: { doubled: 4 } });
    expectDocumented('POST /action/trigger', now);
    // The upstream holds the action's one call for 3 seconds: long enough to find it running.
    const queued = await trigger({ action_name: 'slow-echo', input: { n: 1, ms: 3000 } }, { 'x-async': 'true' });
    expect(queued.status).toBe(202);
    expectDocumented('POST /action/trigger', queued);
    const pending = await api('GET', queued.json.statusUrl);
    expect(pending.status).toBe(202);
    expectDocumented('GET /action/{id}', pending);
    const done = await eventually(
      async () => {
        const result = await api('GET', queued.json.statusUrl);
        return result.status === 200 ? result : undefined;
      },
      20_000,
      'the queued action',
    );
    expect(done.json).toEqual({ n: 1, waited: expect.any(Number) });
    expectDocumented('GET /action/{id}', done);
  }, 30_000);

  it('POST /connect/sessions sent without a body', async () => {
    const created = await fetch(`${stack.url}/connect/sessions`, { method: 'POST', headers: { authorization: `Bearer ${stack.bootstrapKey}` } });
    expectDocumented('POST /connect/sessions', { status: created.status, json: await created.json() });
    expect(created.status).toBe(201);
    // And the document says the body may be left out.
    expect((document.paths['/connect/sessions']!['post'] as unknown as { requestBody: { required: boolean } }).requestBody.required).toBe(false);
  });
});

describe('reads change nothing', () => {
  it("reading an integration's webhook data does not move its updated_at: the secret was made with it", async () => {
    const created = await api('POST', '/integrations', { provider: 'loopback-api', unique_key: 'read-only' });
    expect(created.status).toBe(201);
    const first = await api('GET', '/integrations/read-only?include=webhook');
    const second = await api('GET', '/integrations/read-only?include=webhook');
    expect(first.json.data.webhookSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(second.json.data.webhookSecret).toBe(first.json.data.webhookSecret);
    expect([first.json.data.updated_at, second.json.data.updated_at]).toEqual([created.json.data.updated_at, created.json.data.updated_at]);
  });
});

describe('GET /providers', () => {
  it('answers the key profiles that read the catalog and a connect-session token; other keys get 403', async () => {
    const key = (scopes: string[]) => createScopedKey(stack, scopes);
    const session = (await api('POST', '/connect/sessions', {})).json.data.token as string;
    for (const token of [
      await key(['environment:integrations:list']),
      await key(['environment:integrations:read']),
      await key(['environment:connect_sessions:write']),
      session,
    ]) {
      const list = await http(`${stack.url}/providers?search=github`, { token });
      expect(list.status).toBe(200);
      expect(list.json.data.map((provider: { name: string }) => provider.name)).toContain('github');
      expect((await http(`${stack.url}/providers/github`, { token })).status).toBe(200);
    }
    const refused = await http(`${stack.url}/providers`, { token: await key(['environment:proxy']) });
    expect(refused.status).toBe(403);
    expect(refused.json.error.message).toContain('environment:integrations:list');
    // A session token opens the catalog, nothing of the environment.
    expect((await http(`${stack.url}/connections`, { token: session })).status).toBe(401);
  });
});

describe('what clients of the peer API send', () => {
  it('ignores unknown query parameters on read routes, and still refuses unknown body keys', async () => {
    const read = await api('GET', '/connections/c1?provider_config_key=api&refresh_github_app_jwt_token=true');
    expect(read.status).toBe(200);
    expect((await api('GET', '/integrations?page=2')).status).toBe(200);
    const body = await api('POST', '/connections/metadata', { connection_id: 'c1', provider_config_key: 'api', metadata: {}, extra: 1 });
    expect(body.status).toBe(400);
  });

  it('takes an empty optional header as absent', async () => {
    upstream.reset();
    const response = await fetch(`${stack.url}/proxy/echo/x`, {
      headers: {
        authorization: `Bearer ${stack.bootstrapKey}`,
        'connection-id': 'c1',
        'provider-config-key': 'api',
        'base-url-override': '',
        retries: '',
        'retry-on': '',
        decompress: '',
      },
    });
    expect(response.status).toBe(200);
    expect(upstream.requests.map((request) => request.path)).toEqual(['/echo/x']);
  });
});

describe('a message that can never be handled', () => {
  it('is given up at once and listed for the operator, with its error and without its payload', async () => {
    // A job no code path can handle: its payload breaks the action-runner's contract.
    const nc = await stack.connectNats();
    await jetstream(nc).publish('jobs.action.run', '{"environment_id":42,"note":"poison-payload-marker"}');
    await nc.close();
    const record = await eventually(
      async () => {
        const listed = await http(`${stack.url}/admin/given-up?limit=10`, { token: stack.adminToken });
        expect(listed.status).toBe(200);
        return (listed.json.data as Array<{ subject: string }>).find((item) => item.subject === 'jobs.action.run');
      },
      15_000,
      'the given-up record',
      200,
    );
    expect(record).toMatchObject({ service: 'action-runner', stream: 'JOBS', reason: 'malformed', deliveries: 1, error: { code: 'invalid_body' } });
    const all = await http(`${stack.url}/admin/given-up`, { token: stack.adminToken });
    expect(JSON.stringify(all.json)).not.toContain('poison-payload-marker');
    // Operators only: a customer key cannot read it.
    expect((await http(`${stack.url}/admin/given-up`, { token: stack.bootstrapKey })).status).toBe(401);
  });

  it('is listed under the service that gave it up, never the one a record names: the proxy cannot forge the vault\'s', async () => {
    const forged = (subject: string, stream_seq: number) => ({
      service: 'credential-vault',
      stream: 'JOBS',
      durable: 'forged-durable',
      subject,
      stream_seq,
      deliveries: 1,
      reason: 'final_error',
      error: { code: 'internal_error', message: 'forged by the proxy' },
      at: new Date().toISOString(),
    });
    const nc = await stack.connectNats('proxy');
    const js = jetstream(nc);
    // Where records went before they named their sender in the subject, and the vault's own subject.
    for (const [n, subject] of ['events.message.given_up', 'events.message.given_up.credential-vault'].entries()) {
      await js.publish(subject, JSON.stringify(forged(`forged.${n}`, 9_000 + n))).catch(() => undefined);
    }
    // Its own subject: stored, as the proxy's.
    await js.publish('events.message.given_up.proxy', JSON.stringify(forged('forged.own', 9_100)));
    await nc.close();
    const listed = async () => (await http(`${stack.url}/admin/given-up?limit=100`, { token: stack.adminToken })).json.data as Array<{ service: string; subject: string }>;
    const own = await eventually(async () => (await listed()).find((item) => item.subject === 'forged.own'), 15_000, 'the proxy\'s own record', 200);
    expect(own.service).toBe('proxy');
    expect((await listed()).filter((item) => item.subject.startsWith('forged.') && item.service !== 'proxy')).toEqual([]);
  });
});

describe('logos', () => {
  it('are absolute URLs the gateway serves for every catalog provider: the brand icon, or a monogram', async () => {
    const github = await api('GET', '/providers/github');
    expect(github.json.data.logo_url).toBe(`${stack.url}/logos/github.svg`);
    const icon = await fetch(github.json.data.logo_url);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');
    expect(icon.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await icon.text()).toMatch(/^<svg [^>]+><title>GitHub<\/title><path fill="#[0-9A-F]{6}" d="M/);

    const all = (await api('GET', '/providers')).json.data as Array<{ name: string; logo_url: string }>;
    expect(all.length).toBeGreaterThan(300);
    expect(all.filter((provider) => provider.logo_url !== `${stack.url}/logos/${provider.name}.svg`)).toEqual([]);
    // No brand icon has this name: a monogram of its first letters.
    const monogram = await fetch(`${stack.url}/logos/zzqx-widgets.svg`);
    expect(monogram.status).toBe(200);
    expect(await monogram.text()).toContain('>ZW</text>');

    const integrations = (await api('GET', '/integrations')).json.data as Array<{ provider: string; logo: string }>;
    expect(integrations.length).toBeGreaterThan(0);
    for (const item of integrations) expect(item.logo).toBe(`${stack.url}/logos/${item.provider}.svg`);
    expect((await fetch(`${stack.url}/logos/..%2Fetc%2Fpasswd.svg`)).status).toBe(404);
  });
});

describe('last_fetched_at', () => {
  it('is the time of the latest fetch, on every read and every vault replica: never null after a fetch, never going back', async () => {
    const seen: number[] = [];
    for (let i = 0; i < 12; i++) {
      const before = Date.now();
      const read = await api('GET', '/connections/c1?provider_config_key=api');
      expect(read.status).toBe(200);
      const at = Date.parse(read.json.last_fetched_at);
      expect(at).toBeGreaterThanOrEqual(before - 1000);
      seen.push(at);
    }
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
  });
});

describe('the first steps of a new user', () => {
  it("the bootstrap environment's webhook signing key is readable through the operator API, and it is the one a rotation replaces", async () => {
    const read = await http(`${stack.url}/admin/environments/dev/webhook-signing-key`, { token: stack.adminToken });
    expect(read.status).toBe(200);
    expect(read.json.data.signing_key).toMatch(/^whsec_/);
    expect((await http(`${stack.url}/admin/environments/dev/webhook-signing-key`, { token: stack.bootstrapKey })).status).toBe(401);
    const rotated = await http(`${stack.url}/admin/environments/dev/webhook-signing-key/rotate`, { method: 'POST', token: stack.adminToken });
    const after = await http(`${stack.url}/admin/environments/dev/webhook-signing-key`, { token: stack.adminToken });
    expect(after.json.data.signing_key).toBe(rotated.json.data.signing_key);
    expect(after.json.data.signing_key).not.toBe(read.json.data.signing_key);
  });

  it('a refused upstream address names the setting that allows it', async () => {
    expect((await api('POST', '/integrations', { provider: 'refused-api', unique_key: 'refused' })).status).toBe(201);
    expect((await api('POST', '/connections', { provider_config_key: 'refused', connection_id: 'r1', credentials: { type: 'API_KEY', apiKey: 'k' } })).status).toBe(201);
    const refused = await fetch(`${stack.url}/proxy/anything`, {
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'r1', 'provider-config-key': 'refused' },
    });
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('upstream_not_allowed');
    expect(body.error.message).toContain('PROXY_ALLOW_CIDRS');
  });
});
