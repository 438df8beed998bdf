import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { jetstream } from '@nats-io/jetstream';
import { bundleFunction, describeBundle } from '@latchkey/cli';
import { Latchkey, LatchkeyError } from '@latchkey/client';
import { repoRoot, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { deployWithCli, eventually, FUNCTIONS_DIR, runCli } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { createScopedKey, http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let upstream: TestUpstreamApi;
let client: Latchkey;
const PUBLIC_URL = 'https://latchkey.example.test';

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

function trigger(action: string, input?: unknown, headers: Record<string, string> = {}) {
  return post('/action/trigger', JSON.stringify({ action_name: action, ...(input === undefined ? {} : { input }) }), headers);
}

/** `text` posted as it is, as JSON, for connection conn-1 of `api`. */
function post(path: string, text: string, headers: Record<string, string> = {}) {
  return fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${stack.bootstrapKey}`,
      'content-type': 'application/json',
      'connection-id': 'conn-1',
      'provider-config-key': 'api',
      ...headers,
    },
    body: text,
  });
}

/** `[[…]]`, `levels` deep: JSON.parse takes it, JSON.stringify overflows writing it. */
const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

/** A provider whose catalog entry says how its lists paginate (Link headers, records under `items`). */
const pagedProviderYaml = (baseUrl: string) =>
  `loopback-paged:\n  display_name: Loopback paged\n  categories: [test]\n  auth_mode: API_KEY\n  proxy:\n    base_url: ${baseUrl}\n    headers:\n      X-Api-Key: \${apiKey}\n    paginate:\n      type: link\n      response_path: items\n      limit_name_in_request: limit\n`;

/**
 * A provider that takes every order and breaks off before answering (each connection is reset):
 * whether it placed the order, its caller cannot know.
 */
let ordersTaken = 0;
const breakingProvider = createServer((req) => {
  ordersTaken++;
  req.socket.destroy();
});

beforeAll(async () => {
  upstream = await startUpstreamApi();
  await new Promise<void>((resolve) => breakingProvider.listen(0, '127.0.0.1', resolve));
  const breakingUrl = `http://127.0.0.1:${(breakingProvider.address() as AddressInfo).port}`;
  stack = await startStack({
    // FUNCTION_TIMEOUT_MS bounds every function here, and only the endless loop means to meet it:
    // 3 s was a bet on a loaded machine for a dry run paging through the proxy, or an 11 MB output.
    env: { PROVIDERS_FILE: writeProvidersFile(`${apiKeyProviderYaml(upstream.url)}${pagedProviderYaml(upstream.url)}${apiKeyProviderYaml(breakingUrl, 'loopback-orders')}`), PROXY_ALLOW_CIDRS: '127.0.0.1/32', FUNCTION_TIMEOUT_MS: '10000', FUNCTION_MEMORY_MB: '64' },
    // Integration webhook URLs are built from PUBLIC_URL, as the gateway builds them.
    serviceEnv: { 'action-runner': { PUBLIC_URL: PUBLIC_URL } },
  });
  client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  await seedApiKeyConnection(stack, 'api', 'conn-1', 'upstream-key-123');
  await deployWithCli(FUNCTIONS_DIR, stack);
  await api('POST', '/integrations', { provider: 'loopback-orders', unique_key: 'orders' });
  await api('POST', '/connections', { provider_config_key: 'orders', connection_id: 'shop-1', credentials: { type: 'API_KEY', apiKey: 'orders-key' } });
  await deployWithCli(join(repoRoot(), 'e2e', 'failing-provider-functions'), stack);
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  await new Promise((resolve) => breakingProvider.close(resolve));
});

describe('deploy and scripts config', () => {
  it('lists what the CLI deployed: syncs with models and fields, actions, lifecycle functions', async () => {
    // The `orders` integration's one action aside (its own test is below).
    const config = (await client.getScriptsConfig()).filter((item) => item.providerConfigKey !== 'orders');
    expect(config).toHaveLength(1);
    const entry = config[0]!;
    expect(entry).toMatchObject({ providerConfigKey: 'api', version: 1 });
    expect(entry.syncs).toEqual([
      {
        name: 'items',
        type: 'sync',
        frequency: 'every hour',
        webhookSubscriptions: ['item.updated'],
        models: [{ name: 'Item', fields: [{ name: 'id', type: 'string' }, { name: 'n', type: 'number' }, { name: 'note', type: 'string?' }] }],
      },
    ]);
    expect(entry.actions.map((action) => action.name).sort()).toEqual(['double', 'echo', 'huge', 'set-plan', 'slow-echo']);
    expect(entry.actions.find((action) => action.name === 'double')).toMatchObject({ has_input_schema: true });
    expect(entry.onEventScripts.map((fn) => fn.event).sort()).toEqual(['post-connection-creation', 'pre-connection-deletion']);
  });

  it('refuses a key without environment:deploy, or with it alone, and a missing key variable', async () => {
    const created = await http(`${stack.url}/admin/environments/dev/api-keys`, {
      method: 'POST',
      token: stack.adminToken,
      body: { display_name: 'actions only', scopes: ['environment:actions:execute'] },
    });
    const denied = await runCli(['deploy', FUNCTIONS_DIR, '--environment', 'dev', '--host', stack.url], { SERVICE_SECRET_KEY_DEV: created.json.data.secret });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/403 forbidden/);
    // environment:deploy alone: deployed code runs with the environment's access, which this key lacks.
    const deployOnly = await createScopedKey(stack, ['environment:deploy']);
    const narrow = await runCli(['deploy', FUNCTIONS_DIR, '--environment', 'dev', '--host', stack.url], { SERVICE_SECRET_KEY_DEV: deployOnly });
    expect(narrow.code).toBe(1);
    expect(narrow.stderr).toMatch(/403 forbidden/);
    expect(narrow.stderr).toContain('environment:connections:read_credentials');
    const missing = await runCli(['deploy', FUNCTIONS_DIR, '--environment', 'staging', '--host', stack.url], { SERVICE_SECRET_KEY_DEV: stack.bootstrapKey });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/SERVICE_SECRET_KEY_STAGING is not set/);
  });
});

describe('actions', () => {
  it('runs an action that calls the upstream through ctx.proxy with the connection credentials', async () => {
    const response = await trigger('echo', { word: 'ping' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 200, path: '/echo/ping', query: { from: 'function' }, key: 'upstream-key-123' });
    expect(await client.triggerAction('api', 'conn-1', 'echo', { word: 'sdk' })).toMatchObject({ path: '/echo/sdk' });
  });

  it('validates input against the action schema, and names unknown actions, connections and bad headers', async () => {
    expect(await (await trigger('double', { n: 21 })).json()).toEqual({ doubled: 42 });
    const invalid = await trigger('double', { n: 'lots' });
    expect(invalid.status).toBe(400);
    const body = (await invalid.json()) as { error: { code: string; errors: Array<{ path: string }> } };
    expect(body.error.code).toBe('invalid_body');
    expect(body.error.errors[0]!.path).toBe('input.n');
    const tooBig = await trigger('double', { n: 1, padding: 'x'.repeat(600 * 1024) });
    expect(tooBig.status).toBe(413);
    // Too deep to be written on its way to the runner: a 500 before.
    for (const levels of [65, 20_000]) {
      const tooDeep = await post('/action/trigger', `{"action_name":"double","input":{"n":1,"deep":${nested(levels)}}}`);
      expect({ status: tooDeep.status, code: ((await tooDeep.json()) as { error: { code: string } }).error.code }).toEqual({ status: 400, code: 'invalid_body' });
    }
    expect((await trigger('nope')).status).toBe(404);
    expect(((await (await trigger('nope')).json()) as { error: { code: string } }).error.code).toBe('unknown_action');
    expect(((await (await trigger('echo', undefined, { 'connection-id': 'ghost' })).json()) as { error: { code: string } }).error.code).toBe('unknown_connection');
    const noHeaders = await fetch(`${stack.url}/action/trigger`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action_name: 'echo' }),
    });
    expect(noHeaders.status).toBe(400);
    expect(((await noHeaders.json()) as { error: { code: string } }).error.code).toBe('invalid_headers');
  });

  it('runs an action asynchronously: 202 with a statusUrl, then the output from it', async () => {
    const queued = await trigger('echo', { word: 'later' }, { 'x-async': 'true' });
    expect(queued.status).toBe(202);
    const handle = (await queued.json()) as { id: string; statusUrl: string };
    expect(handle.statusUrl).toBe(`/action/${handle.id}`);
    const output = await eventually(
      async () => {
        const result = await api('GET', handle.statusUrl);
        if (result.status === 202) {
          expect(['queued', 'running']).toContain(result.json.status);
          return undefined;
        }
        expect(result.status).toBe(200);
        return result.json;
      },
      20_000,
      'the async action',
    );
    expect(output).toMatchObject({ path: '/echo/later', key: 'upstream-key-123' });
    // The SDK: by id and by statusUrl.
    const sdkHandle = await client.triggerActionAsync('api', 'conn-1', 'double', { n: 5 });
    const viaSdk = await eventually(
      async () => {
        try {
          return await client.getAsyncActionResult(sdkHandle);
        } catch (error) {
          if (error instanceof LatchkeyError && error.code === 'action_pending') return undefined;
          throw error;
        }
      },
      20_000,
      'the SDK async action',
    );
    expect(viaSdk).toEqual({ doubled: 10 });
    expect(await client.getAsyncActionResult(sdkHandle.id)).toEqual({ doubled: 10 });
    expect((await api('GET', '/action/not-a-run')).json.error.code).toBe('unknown_action_run');
    // Another environment's key cannot read it.
    await http(`${stack.url}/admin/environments`, { method: 'POST', token: stack.adminToken, body: { name: 'other' } });
    const otherKey = await http(`${stack.url}/admin/environments/other/api-keys`, { method: 'POST', token: stack.adminToken, body: { display_name: 'other', scopes: 'full_access' } });
    const foreign = await http(`${stack.url}${handle.statusUrl}`, { token: otherKey.json.data.secret });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.code).toBe('unknown_action_run');
  });

  it('runs an async action once when the provider breaks off: the provider\'s failure is the outcome, not an outage to run it again for', async () => {
    ordersTaken = 0;
    const queued = await trigger('place-order', undefined, { 'x-async': 'true', 'connection-id': 'shop-1', 'provider-config-key': 'orders' });
    expect(queued.status).toBe(202);
    const { statusUrl } = (await queued.json()) as { statusUrl: string };
    const result = await eventually(async () => {
      const answer = await api('GET', statusUrl);
      return answer.status === 202 ? undefined : answer;
    }, 30_000, 'the async action to end');
    expect(result.json.error).toMatchObject({ code: 'function_failed', message: expect.stringContaining('could not be reached') });
    // Given time to be run again, it is not: the provider saw the order once.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(ordersTaken).toBe(1);
  });

  it('refuses an output over 10 MB, synchronously and asynchronously', async () => {
    const response = await trigger('huge');
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('action_output_too_large');
    const handle = (await (await trigger('huge', undefined, { 'x-async': 'true' })).json()) as { statusUrl: string };
    const failed = await eventually(
      async () => {
        const result = await api('GET', handle.statusUrl);
        return result.status === 202 ? undefined : result;
      },
      20_000,
      'the async huge action',
    );
    expect(failed.status).toBe(400);
    expect(failed.json.error.code).toBe('action_output_too_large');
  });
});

describe('compile and dry runs', () => {
  it('compiles source on the server and reports diagnostics', async () => {
    const good = await api('POST', '/functions/compile', {
      source: `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'hi', exec: () => 'hi' });\n`,
    });
    expect(good.status).toBe(200);
    expect(good.json).toMatchObject({ success: true, diagnostics: [] });
    expect(good.json.bytes).toBeGreaterThan(0);
    const bad = await api('POST', '/functions/compile', { source: `export default {\n  exec: () => { return 1 +; }\n};\n` });
    expect(bad.json.success).toBe(false);
    expect(bad.json.diagnostics[0]).toMatchObject({ severity: 'error', line: 2 });
    const typed = await api('POST', '/functions/compile', {
      source: `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'env', exec: () => process.env.SECRET });\n`,
    });
    expect(typed.json.success).toBe(false);
    expect(typed.json.diagnostics[0]).toMatchObject({ severity: 'error', line: 2, message: expect.stringMatching(/Cannot find name 'process'/) });
    const missing = await api('POST', '/functions/compile', { source: `import leftPad from 'left-pad-not-installed';\nexport default leftPad;\n` });
    expect(missing.json.success).toBe(false);
  });

  it('dry-runs a deployed function against the real connection and persists nothing', async () => {
    const before = (await api('GET', '/connections/conn-1?provider_config_key=api')).json.metadata;
    const configBefore = await client.getScriptsConfig();
    const dry = await api('POST', '/functions/dryruns', { provider_config_key: 'api', connection_id: 'conn-1', function_name: 'set-plan', input: { plan: 'gold' } });
    expect(dry.status).toBe(200);
    expect(dry.json).toMatchObject({
      function: { type: 'action', name: 'set-plan' },
      success: true,
      output: { plan: 'gold' },
      writes: [{ operation: 'updateMetadata', data: { plan: 'gold' } }],
    });
    // Source never deployed: a sync whose records are listed, not stored.
    const source = `import { defineSync } from '@latchkey/functions';
export default defineSync({
  name: 'draft', frequency: 'every day', models: { Item: { id: 'string' } },
  exec: async (ctx) => {
    for await (const page of ctx.paginate<{ id: string }>({ endpoint: '/paginate/offset', paginate: { type: 'offset', response_path: 'items', offset_name_in_request: 'offset' } })) {
      ctx.log('page', { size: page.length });
      await ctx.batchSave(page, 'Item');
    }
  },
});`;
    const draft = await api('POST', '/functions/dryruns', { provider_config_key: 'api', connection_id: 'conn-1', source });
    expect(draft.json).toMatchObject({ function: { type: 'sync', name: 'draft' }, success: true });
    expect(draft.json.writes.flatMap((write: { data: Array<{ id: string }> }) => write.data.map((item) => item.id))).toHaveLength(6);
    expect(draft.json.logs.filter((line: { message: string }) => line.message === 'page')).toHaveLength(3);
    // The deployed sync (cursor pagination given in code) and, for an integration whose
    // provider entry names its pagination (Link headers), source that relies on it.
    const items = await api('POST', '/functions/dryruns', { provider_config_key: 'api', connection_id: 'conn-1', function_name: 'items' });
    expect(items.json).toMatchObject({ function: { type: 'sync', name: 'items' }, success: true });
    expect(items.json.writes.map((write: { data: unknown[] }) => write.data.length)).toEqual([2, 2, 2]);
    await api('POST', '/integrations', { provider: 'loopback-paged', unique_key: 'paged' });
    await api('POST', '/connections', { provider_config_key: 'paged', connection_id: 'paged-1', credentials: { type: 'API_KEY', apiKey: 'paged-key' } });
    const linked = await api('POST', '/functions/dryruns', {
      provider_config_key: 'paged',
      connection_id: 'paged-1',
      source: `import { defineAction } from '@latchkey/functions';
export default defineAction({ name: 'all-ids', exec: async (ctx) => {
  const ids: string[] = [];
  for await (const page of ctx.paginate<{ id: string }>({ endpoint: '/paginate/link', paginate: { limit: 4 } })) ids.push(...page.map((item) => item.id));
  return ids;
} });`,
    });
    expect(linked.json).toMatchObject({ success: true, output: ['item-1', 'item-2', 'item-3', 'item-4', 'item-5', 'item-6'] });
    const failing = await api('POST', '/functions/dryruns', {
      provider_config_key: 'api',
      connection_id: 'conn-1',
      source: `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'boom', exec: (ctx) => { ctx.log('warn', 'about to fail'); throw new Error('kaboom'); } });`,
    });
    expect(failing.json).toMatchObject({ success: false, error: { code: 'function_failed', message: 'kaboom' }, logs: [{ level: 'warn', message: 'about to fail' }] });
    // Nothing changed: metadata, deployments.
    expect((await api('GET', '/connections/conn-1?provider_config_key=api')).json.metadata).toEqual(before);
    expect(await client.getScriptsConfig()).toEqual(configBefore);
  });
});

describe('the sandbox, through the service', () => {
  const dryRun = (body: string) =>
    api('POST', '/functions/dryruns', {
      provider_config_key: 'api',
      connection_id: 'conn-1',
      source: `import { defineAction } from '@latchkey/functions';\nconst host = globalThis as any;\nexport default defineAction({ name: 'probe', exec: async () => { ${body} } });`,
    });

  it('stops an endless loop at FUNCTION_TIMEOUT_MS and a memory bomb at FUNCTION_MEMORY_MB; the next run is fine', async () => {
    const started = Date.now();
    const loop = await dryRun('for (;;) {}');
    expect(loop.json).toMatchObject({ success: false, error: { code: 'function_timed_out' } });
    // At the 10 s timeout, not at the gateway's wait for a dry run (40 s more).
    expect(Date.now() - started).toBeLessThan(25_000);
    const bomb = await dryRun('const hoard: number[][] = []; for (;;) hoard.push(new Array(100000).fill(hoard.length));');
    expect(bomb.json).toMatchObject({ success: false, error: { code: 'function_memory_exceeded' } });
    expect((await dryRun('return 1 + 1;')).json).toMatchObject({ success: true, output: 2 });
    expect((await trigger('double', { n: 4 })).status).toBe(200);
  }, 60_000);

  it('has no process environment, module loader or network inside', async () => {
    expect((await dryRun('return host.process.env.HOME;')).json.error.message).toMatch(/Cannot read properties of undefined/);
    expect((await dryRun(`return host.require('node:fs').readFileSync('/etc/passwd', 'utf8');`)).json.error.message).toMatch(/not a function/);
    expect((await dryRun(`return await host.fetch('http://127.0.0.1:1/');`)).json.error.message).toMatch(/not a function/);
    expect((await dryRun(`return [typeof host.process, typeof host.require, typeof host.fetch, typeof host.WebSocket, typeof host.setTimeout];`)).json.output).toEqual([
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
    ]);
  });
});

describe('lifecycle functions', () => {
  it('runs post-connection-creation when a connection is imported: it writes metadata', async () => {
    upstream.reset();
    expect((await api('POST', '/connections', { provider_config_key: 'api', connection_id: 'conn-2', credentials: { type: 'API_KEY', apiKey: 'key-2' } })).status).toBe(201);
    const environments = await http(`${stack.url}/admin/environments`, { token: stack.adminToken });
    const publicId = environments.json.data.find((environment: { name: string }) => environment.name === 'dev').public_id;
    const metadata = await eventually(
      async () => {
        const connection = await api('GET', '/connections/conn-2?provider_config_key=api');
        return connection.json.metadata?.subscription ? connection.json.metadata : undefined;
      },
      20_000,
      'the post-creation metadata',
    );
    expect(metadata).toEqual({ subscription: '/echo/subscriptions', webhook_url: `${PUBLIC_URL}/webhook/${publicId}/api`, secret_set: true });
    expect(upstream.requests.filter((request) => request.path === '/echo/subscriptions' && request.method === 'POST')).toHaveLength(1);
  });

  it('a failing pre-connection-deletion function does not stop the deletion', async () => {
    expect((await trigger('echo', undefined, { 'connection-id': 'conn-2' })).status).toBe(200);
    upstream.reset();
    const deleted = await api('DELETE', '/connections/conn-2?provider_config_key=api');
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ success: true });
    // It ran while the connection still existed (its proxy call carried the credentials).
    const unsubscribe = upstream.requests.find((request) => request.path === '/echo/subscriptions/conn-2');
    expect(unsubscribe?.method).toBe('DELETE');
    expect(unsubscribe?.headers['x-api-key']).toBe('key-2');
    expect((await api('GET', '/connections/conn-2?provider_config_key=api')).status).toBe(404);
    // The operators' log says that it failed, not what the customer's code said (it may print anything).
    const runnerLog = stack.services.find((service) => service.service === 'action-runner')!.output();
    expect(runnerLog).toContain('a lifecycle function failed');
    expect(runnerLog).not.toContain('the provider refused to unsubscribe');
    // The runner had seen conn-2 exist; the deletion makes it forget.
    await eventually(async () => ((await trigger('echo', undefined, { 'connection-id': 'conn-2' })).status === 404 ? true : undefined), 5000, 'unknown_connection');
  });
});

describe('webhook functions', () => {
  it('hands a routed provider webhook to the onWebhook of each sync subscribed to its type', async () => {
    const environment = (await http(`${stack.url}/admin/environments`, { token: stack.adminToken })).json.data.find((item: { name: string }) => item.name === 'dev');
    // As the webhook router, under its own NATS identity.
    const nc = await stack.connectNats('webhook-router');
    try {
      // As the webhook router announces a verified and routed provider webhook.
      const announce = (connectionId: string | null, payload: unknown) =>
        jetstream(nc).publish(
          'events.webhook.received',
          JSON.stringify({ environment_id: environment.id, inbound_id: `in-${Math.random()}`, provider_config_key: 'api', provider: 'loopback-api', connection_id: connectionId, payload }),
        );
      await announce('conn-1', { type: 'item.deleted', id: 'not-subscribed' });
      await announce(null, { type: 'item.updated', id: 'no-connection' });
      await announce('conn-1', { type: 'item.updated', id: 'item-7' });
      const metadata = await eventually(
        async () => {
          const connection = await api('GET', '/connections/conn-1?provider_config_key=api');
          return connection.json.metadata?.last_webhook ? connection.json.metadata : undefined;
        },
        20_000,
        'the onWebhook metadata',
      );
      expect(metadata.last_webhook).toBe('item-7');
    } finally {
      await nc.close();
    }
  });
});

describe('redeploy', () => {
  it('swaps the whole set at once: the next version replaces every function', async () => {
    const file = join(FUNCTIONS_DIR, 'api', 'double.ts');
    const bundled = await bundleFunction({ entry: file });
    if (!bundled.ok) throw new Error('double.ts did not bundle');
    const deployed = await api('POST', '/functions/deployments', {
      provider_config_key: 'api',
      functions: [{ description: describeBundle(bundled.bundle, file), bundle: bundled.bundle }],
    });
    expect(deployed.status).toBe(201);
    expect(deployed.json.data).toEqual({ provider_config_key: 'api', version: 2, functions: [{ name: 'double', type: 'action' }] });
    expect(await (await trigger('double', { n: 1 })).json()).toEqual({ doubled: 2 });
    expect((await trigger('echo')).status).toBe(404);
    const entry = (await client.getScriptsConfig()).find((item) => item.providerConfigKey === 'api');
    expect(entry).toMatchObject({ version: 2, syncs: [], onEventScripts: [] });
    const unknown = await api('POST', '/functions/deployments', { provider_config_key: 'nope', functions: [] });
    expect(unknown.json.error.code).toBe('unknown_provider_config');
  });
});

describe('a deployment whose sync has a frequency that does not parse', () => {
  // Accepted before, and the sync ran once a day, whatever the author meant.
  it.each(['hourly', 'every 30 seconds', 'every 1.5 hours'])('is refused with invalid_frequency (%j), and the deployed set stays', async (frequency) => {
    const before = (await client.getScriptsConfig()).find((item) => item.providerConfigKey === 'api');
    const refused = await api('POST', '/functions/deployments', {
      provider_config_key: 'api',
      functions: [{ description: { type: 'sync', name: 'badly-timed', frequency, models: [{ name: 'Item', fields: [] }], webhook_subscriptions: [] }, bundle: 'module.exports = {};' }],
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe('invalid_frequency');
    expect(refused.json.error.message).toContain('badly-timed');
    expect((await client.getScriptsConfig()).find((item) => item.providerConfigKey === 'api')).toEqual(before);
  });

  it("is refused with invalid_body when an action's input schema is nested 20,000 levels, and the deployed set stays", async () => {
    const before = (await client.getScriptsConfig()).find((item) => item.providerConfigKey === 'api');
    const description = `{"type":"action","name":"deep","has_input_schema":true,"input_schema":{"deep":${nested(20_000)}}}`;
    const refused = await post('/functions/deployments', `{"provider_config_key":"api","functions":[{"description":${description},"bundle":"module.exports = {};"}]}`);
    expect({ status: refused.status, code: ((await refused.json()) as { error: { code: string } }).error.code }).toEqual({ status: 400, code: 'invalid_body' });
    expect((await client.getScriptsConfig()).find((item) => item.providerConfigKey === 'api')).toEqual(before);
  });
});

describe('an integration deleted', () => {
  it('takes its deployed functions with it: the key made again, for any provider, starts with none', async () => {
    expect((await client.getScriptsConfig()).some((item) => item.providerConfigKey === 'orders')).toBe(true);
    expect((await api('DELETE', '/integrations/orders')).status).toBe(200);
    await eventually(async () => ((await client.getScriptsConfig()).some((item) => item.providerConfigKey === 'orders') ? undefined : true), 20_000, 'the deployment to go');
    await api('POST', '/integrations', { provider: 'loopback-api', unique_key: 'orders' });
    await api('POST', '/connections', { provider_config_key: 'orders', connection_id: 'shop-2', credentials: { type: 'API_KEY', apiKey: 'k' } });
    const stale = await trigger('place-order', undefined, { 'connection-id': 'shop-2', 'provider-config-key': 'orders' });
    expect(stale.status).toBe(404);
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe('unknown_action');
  });
});
