import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Latchkey } from '@latchkey/client';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { deployWithCli, eventually, FUNCTIONS_DIR } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { createScopedKey, http, startStack, type NatsSnoop, type Stack } from './support/stack.js';
import { ACME_PROVIDER_YAML, sendProviderWebhook, startReceiver, webhookEnvironment, type Receiver } from './support/webhooks.js';

/** Secrets that pass through every kind of operation and must never be logged. */
const CANARY = {
  connectionKey: 'canary-connection-key-4b1d7c',
  query: 'canary-query-secret-91ae',
  header: 'canary-header-secret-e52f',
  endUserKey: 'canary-end-user-key-0c3b',
};

let stack: Stack;
let upstream: TestUpstreamApi;
let receiver: Receiver;
let snoop: NatsSnoop;
let hooks: Awaited<ReturnType<typeof webhookEnvironment>>;

const api = (method: string, path: string, body?: unknown, token = stack.bootstrapKey) => http(`${stack.url}${path}`, { method, token, ...(body === undefined ? {} : { body }) });

interface OperationView {
  id: string;
  type: string;
  status: string;
  started_at: string;
  duration_ms: number;
  integration_id?: string;
  connection_id?: string;
  request_id?: string;
  trace_id?: string;
  error?: { code: string; message: string };
  proxy?: { method: string; path: string; upstream_status?: number };
}

/** Every page of `GET /operations?query`, following `next_cursor`. */
async function allOperations(query: string, token = stack.bootstrapKey): Promise<OperationView[]> {
  const found: OperationView[] = [];
  let cursor: string | null = null;
  do {
    const page = await api('GET', `/operations?${query}&limit=2${cursor ? `&cursor=${cursor}` : ''}`, undefined, token);
    expect(page.status).toBe(200);
    found.push(...(page.json.operations as OperationView[]));
    cursor = page.json.next_cursor as string | null;
  } while (cursor !== null);
  return found;
}

const operationsOf = (query: string, enough: (found: OperationView[]) => boolean, token = stack.bootstrapKey) =>
  eventually(
    async () => {
      const listed = await api('GET', `/operations?${query}&limit=1000`, undefined, token);
      const found = listed.json.operations as OperationView[];
      return enough(found) ? found : undefined;
    },
    30_000,
    `operations ${query}`,
    250,
  );

beforeAll(async () => {
  upstream = await startUpstreamApi();
  receiver = await startReceiver();
  stack = await startStack({
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url) + ACME_PROVIDER_YAML), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    serviceEnv: { 'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' } },
  });
  snoop = await stack.snoop();
  await seedApiKeyConnection(stack, 'api', 'conn-1', CANARY.connectionKey);
  hooks = await webhookEnvironment(stack, 'hooks', receiver.url);
  await hooks.api('POST', '/connections', { provider_config_key: 'acme', connection_id: 'acme-1', credentials: { type: 'API_KEY', apiKey: 'k' }, connection_config: { accountId: 'acct-1' } });
}, 120_000);

afterAll(async () => {
  await snoop?.stop();
  await stack?.dispose();
  await upstream?.close();
  await receiver?.close();
});

describe('the operations log', () => {
  it('records a proxy call with its method, path without query, upstream status, request and trace ids', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const response = await fetch(`${stack.url}/proxy/echo/items/7?token=${CANARY.query}`, {
      headers: {
        authorization: `Bearer ${stack.bootstrapKey}`,
        'connection-id': 'conn-1',
        'provider-config-key': 'api',
        'service-proxy-x-secret': CANARY.header,
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
    });
    expect(response.status).toBe(200);
    const requestId = response.headers.get('x-request-id');
    await response.arrayBuffer();
    const failed = await fetch(`${stack.url}/proxy/status/503`, { headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'conn-1', 'provider-config-key': 'api' } });
    await failed.arrayBuffer();

    const [proxied] = await operationsOf('type=proxy&status=success', (found) => found.some((operation) => operation.proxy?.path === '/echo/items/7'));
    const found = (await allOperations('type=proxy&status=success')).find((operation) => operation.proxy?.path === '/echo/items/7');
    expect(found).toMatchObject({
      type: 'proxy',
      status: 'success',
      integration_id: 'api',
      connection_id: 'conn-1',
      trace_id: traceId,
      proxy: { method: 'GET', path: '/echo/items/7', upstream_status: 200 },
    });
    expect(proxied).toBeDefined();
    expect(requestId).toBeTruthy();
    expect(found?.request_id).toBe(requestId);
    expect(found?.duration_ms).toBeGreaterThanOrEqual(0);
    const one = await api('GET', `/operations/${found?.id}`);
    expect(one.status).toBe(200);
    expect(one.json).toEqual(found);
  }, 60_000);

  it('records a failed upstream answer as a failure with its status', async () => {
    const [failure] = await operationsOf('type=proxy&status=failure', (found) => found.length > 0);
    expect(failure).toMatchObject({ status: 'failure', proxy: { path: '/status/503', upstream_status: 503 } });
  }, 60_000);

  it('records a connect-flow step, a deploy, and an action run', async () => {
    const { token } = (await api('POST', '/connect/sessions', { allowed_integrations: ['api'] })).json.data;
    const saved = await http(`${stack.url}/api-auth/api-key/api?connect_session_token=${token}`, { method: 'POST', body: { apiKey: CANARY.endUserKey } });
    expect(saved.status).toBe(200);
    await deployWithCli(FUNCTIONS_DIR, stack);
    const triggered = await fetch(`${stack.url}/action/trigger`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'api' },
      body: JSON.stringify({ action_name: 'echo', input: { word: 'logged' } }),
    });
    expect(triggered.status).toBe(200);
    await triggered.arrayBuffer();

    const [connect] = await operationsOf('type=connect', (found) => found.length > 0);
    expect(connect).toMatchObject({ type: 'connect', status: 'success', integration_id: 'api', connection_id: saved.json.connectionId });
    const [deploy] = await operationsOf('type=deploy', (found) => found.length > 0);
    expect(deploy).toMatchObject({ type: 'deploy', status: 'success', integration_id: 'api' });
    const [action] = await operationsOf('type=action_run&connection_id=conn-1', (found) => found.length > 0);
    expect(action).toMatchObject({ type: 'action_run', status: 'success', integration_id: 'api', connection_id: 'conn-1' });
    // A sync run, once the deployment's schedules exist.
    await eventually(async () => ((await api('POST', '/sync/trigger', { provider_config_key: 'api', syncs: ['items'], connection_id: 'conn-1' })).status === 200 ? true : undefined), 30_000, 'the items schedule');
    // Only conn-1's: the connection the connect flow made above syncs too, on its own schedule.
    const [run] = await operationsOf('type=sync_run&connection_id=conn-1', (found) => found.length > 0);
    expect(run).toMatchObject({ type: 'sync_run', integration_id: 'api', connection_id: 'conn-1' });
    // The action's own proxy call is logged too, with its path and no query.
    const fromAction = await operationsOf('type=proxy&integration_id=api', (found) => found.some((operation) => operation.proxy?.path === '/echo/logged'));
    expect(fromAction.find((operation) => operation.proxy?.path === '/echo/logged')?.proxy?.path).toBe('/echo/logged');
  }, 120_000);

  it('records a provider webhook and the delivery of its forwarded copy, in their environment', async () => {
    const sent = await sendProviderWebhook(stack, hooks.publicId, { account: { id: 'acct-1' }, marker: 'oplog' }, { secret: hooks.webhookSecret });
    expect(sent.status).toBeLessThan(300);
    const [inbound] = await operationsOf('type=webhook_inbound', (found) => found.length > 0, hooks.apiKey);
    expect(inbound).toMatchObject({ type: 'webhook_inbound', status: 'success', integration_id: 'acme', connection_id: 'acme-1' });
    const [outbound] = await operationsOf('type=webhook_outbound', (found) => found.length > 0, hooks.apiKey);
    expect(outbound).toMatchObject({ type: 'webhook_outbound', status: 'success' });
    // The operator reads the same log.
    const asOperator = await http(`${stack.url}/admin/environments/hooks/operations?type=webhook_inbound`, { token: stack.adminToken });
    expect(asOperator.json.operations[0]).toEqual(inbound);
    const oneAsOperator = await http(`${stack.url}/admin/environments/hooks/operations/${inbound?.id}`, { token: stack.adminToken });
    expect(oneAsOperator.json).toEqual(inbound);
  }, 60_000);

  it('lists newest first, filters by time range, and pages with a cursor', async () => {
    // Services send their operations in batches, up to a second after they end: the log is read
    // once nothing more lands, so the time ranges below split one and the same log.
    let everything = await allOperations('');
    for (let before = -1; everything.length !== before; ) {
      before = everything.length;
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      everything = await allOperations('');
    }
    expect(everything.length).toBeGreaterThanOrEqual(5);
    const starts = everything.map((operation) => Date.parse(operation.started_at));
    expect(starts).toEqual([...starts].sort((a, b) => b - a));
    expect(new Set(everything.map((operation) => operation.id)).size).toBe(everything.length);
    const middle = everything[Math.floor(everything.length / 2)]!;
    const before = await allOperations(`to=${encodeURIComponent(middle.started_at)}`);
    expect(before.every((operation) => Date.parse(operation.started_at) < Date.parse(middle.started_at))).toBe(true);
    const since = await allOperations(`from=${encodeURIComponent(middle.started_at)}`);
    expect(since.every((operation) => Date.parse(operation.started_at) >= Date.parse(middle.started_at))).toBe(true);
    expect(before.length + since.length).toBe(everything.length);
    const two = await allOperations('type=deploy,connect');
    expect(new Set(two.map((operation) => operation.type))).toEqual(new Set(['deploy', 'connect']));
    expect((await api('GET', '/operations?type=nope')).status).toBe(400);

    // The packaged client reads the same log.
    const client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
    const page = await client.listOperations({ type: ['deploy', 'connect'], limit: 1 });
    expect(page.operations).toEqual([two[0]]);
    expect(await client.getOperation(two[0]!.id)).toEqual(two[0]);
  }, 60_000);

  it('needs environment:operations:read, and shows an environment only its own operations', async () => {
    const proxyOnly = await createScopedKey(stack, ['environment:proxy']);
    const refused = await api('GET', '/operations', undefined, proxyOnly);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('forbidden');
    const reader = await createScopedKey(stack, ['environment:operations:read']);
    expect((await api('GET', '/operations', undefined, reader)).status).toBe(200);

    const ofDev = (await api('GET', '/operations?limit=1')).json.operations[0] as OperationView;
    const otherView = await api('GET', `/operations/${ofDev.id}`, undefined, hooks.apiKey);
    expect(otherView.status).toBe(404);
    const hooksTypes = new Set((await allOperations('', hooks.apiKey)).map((operation) => operation.type));
    expect(hooksTypes.has('proxy')).toBe(false);
    expect(hooksTypes.has('deploy')).toBe(false);
  }, 60_000);

  it('never holds a credential, in the API or on the wire', async () => {
    const listed = JSON.stringify([...(await allOperations('')), ...(await allOperations('', hooks.apiKey))]);
    const batches = snoop.messages.filter((message) => message.subject.startsWith('operations.recorded.'));
    expect(batches.length).toBeGreaterThan(0);
    const wire = batches.map((message) => message.data).join('\n');
    for (const canary of [...Object.values(CANARY), stack.bootstrapKey, hooks.apiKey, hooks.webhookSecret]) {
      expect(listed).not.toContain(canary);
      expect(wire).not.toContain(canary);
    }
  }, 60_000);
});
