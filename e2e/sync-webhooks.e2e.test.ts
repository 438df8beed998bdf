import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { Latchkey } from '@latchkey/client';
import { repoRoot, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { deployWithCli, eventually } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/**
 * A sync's two sides beyond `exec`: its `onWebhook` writes records as `exec` does (and they send
 * the `sync` webhook), and its failures show on the connection until it succeeds again.
 * `e2e/sync-webhook-functions/desk/tickets.ts` is the sync.
 */
let stack: Stack;
let upstream: TestUpstreamApi;
let receiver: Receiver;
let client: Latchkey;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

async function tickets(): Promise<Array<Record<string, unknown>>> {
  return (await client.listRecords({ providerConfigKey: 'desk', connectionId: 'conn-1', model: 'Ticket' })).records;
}

async function connectionErrors(): Promise<Array<{ type: string; log_id: string }>> {
  return (await api('GET', '/connections/conn-1?provider_config_key=desk')).json.errors;
}

/** Runs the sync now and waits for that run's status. */
async function runTickets(): Promise<{ status: string; finishedAt: string | null; latestError: { code: string; message: string } | null }> {
  const before = new Date().toISOString();
  expect((await api('POST', '/sync/trigger', { provider_config_key: 'desk', syncs: ['tickets'], connection_id: 'conn-1' })).status).toBe(200);
  return eventually(
    async () => {
      const { syncs } = await client.syncStatus('desk', ['tickets'], 'conn-1');
      const status = syncs.find((entry) => entry.variant === 'base');
      return status && status.status !== 'RUNNING' && status.finishedAt !== null && status.finishedAt > before ? status : undefined;
    },
    60_000,
    'a finished tickets run',
    300,
  );
}

beforeAll(async () => {
  upstream = await startUpstreamApi();
  receiver = await startReceiver();
  stack = await startStack({
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    serviceEnv: { 'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' } },
  });
  client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  expect((await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { webhook_url: receiver.url } })).status).toBe(200);
  await seedApiKeyConnection(stack, 'desk', 'conn-1', 'desk-key');
  await deployWithCli(join(repoRoot(), 'e2e', 'sync-webhook-functions'), stack);
  await runTickets();
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
  await receiver?.close();
  await upstream?.close();
});

describe("a sync's onWebhook", () => {
  it('writes the records a signed provider webhook carries, read back with GET /records, and sends the sync webhook', async () => {
    const { webhook_url: url, webhookSecret: secret } = (await api('GET', '/integrations/desk?include=webhook')).json.data;
    const body = JSON.stringify({ type: 'ticket.updated', ticket: { id: 't-42', subject: 'Printer on fire' } });
    const signature = createHmac('sha256', secret).update(body).digest('hex');
    const sent = await fetch(`${url}?serviceConnectionId=conn-1`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-loopback-api-signature-256': signature }, body });
    expect(sent.status).toBe(200);

    const saved = await eventually(async () => (await tickets()).find((record) => record.id === 't-42'), 30_000, 'the webhook ticket', 300);
    expect(saved).toMatchObject({ id: 't-42', subject: 'Printer on fire', _metadata: { last_action: 'ADDED' } });
    const [hook] = await receiver.waitFor((item) => item.json?.type === 'sync' && item.json.model === 'Ticket' && item.json.responseResults?.added === 1 && item.json.syncName === 'tickets' && item.json.connectionId === 'conn-1' && String(item.headers['webhook-id'] ?? '').includes('webhook-'));
    expect(hook!.json).toMatchObject({ syncVariant: 'base', providerConfigKey: 'desk' });
  });
});

describe('sync failures on the connection', () => {
  it('a failed run adds {type: sync, log_id} to the connection errors; the next successful run clears it', async () => {
    expect((await api('POST', '/connections/metadata', { connection_id: 'conn-1', provider_config_key: 'desk', metadata: { fail_tickets: true } })).status).toBe(201);
    const failed = await runTickets();
    expect(failed.status).toBe('ERROR');
    // The failure carries its cause.
    expect(failed.latestError).toMatchObject({ code: 'function_failed', message: expect.stringContaining('the ticket service answered 500') });
    const marked = await eventually(async () => (await connectionErrors()).find((error) => error.type === 'sync'), 15_000, 'the sync error on the connection', 200);
    expect(marked.log_id).toEqual(expect.any(String));

    expect((await api('POST', '/connections/metadata', { connection_id: 'conn-1', provider_config_key: 'desk', metadata: { fail_tickets: false } })).status).toBe(201);
    expect((await runTickets()).status).toBe('SUCCESS');
    await eventually(async () => ((await connectionErrors()).some((error) => error.type === 'sync') ? undefined : true), 15_000, 'the sync error to clear', 200);
  });
});
