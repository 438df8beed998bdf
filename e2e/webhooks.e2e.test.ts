import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Latchkey, verifyWebhookSignature } from '@latchkey/client';
import { writeProvidersFile } from './support/providers.js';
import { startStack, type Stack } from './support/stack.js';
import { ACME_PROVIDER_YAML, acmeOAuthProviderYaml, sendProviderText, sendProviderWebhook, startReceiver, webhookEnvironment, type Receiver } from './support/webhooks.js';

let stack: Stack;
let receiver: Receiver;
let env: Awaited<ReturnType<typeof webhookEnvironment>>;
let quiet: Awaited<ReturnType<typeof webhookEnvironment>>;
/** A provider token endpoint that refuses every refresh. */
let tokenEndpoint: Server;

const marked = (marker: string) => (item: { json: any }) => item.json?.payload?.marker === marker;

beforeAll(async () => {
  receiver = await startReceiver();
  tokenEndpoint = createServer((_req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_grant","error_description":"revoked"}'));
  await new Promise<void>((resolve) => tokenEndpoint.listen(0, '127.0.0.1', resolve));
  const tokenUrl = `http://127.0.0.1:${(tokenEndpoint.address() as AddressInfo).port}/token`;
  stack = await startStack({
    serviceEnv: {
      'credential-vault': { PROVIDERS_FILE: writeProvidersFile(ACME_PROVIDER_YAML + acmeOAuthProviderYaml(tokenUrl)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
      'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_RETRY_CAP_MS: '500' },
    },
  });
  env = await webhookEnvironment(stack, 'hooks', receiver.url, { sendAuth: true });
  quiet = await webhookEnvironment(stack, 'quiet', receiver.url, { forward: false });
  await env.api('POST', '/connections', {
    provider_config_key: 'acme',
    connection_id: 'conn-1',
    credentials: { type: 'API_KEY', apiKey: 'k' },
    connection_config: { accountId: 'acct-9' },
  });
}, 90_000);

afterAll(async () => {
  await stack?.dispose();
  await receiver?.close();
  tokenEndpoint?.close();
});

/**
 * An environment's webhook log as its operator reads it (`GET /admin/environments/{name}/webhooks/
 * inbound` or `…/attempts`, with `query`), once `done` holds for what it lists.
 */
async function webhookLog(name: string, kind: 'inbound' | 'attempts', query: string, done: (entries: any[]) => boolean = (entries) => entries.length > 0): Promise<any[]> {
  let entries: any[] = [];
  for (let i = 0; i < 100; i++) {
    const listed = await env.admin('GET', `/environments/${name}/webhooks/${kind}?${query}`);
    expect(listed.status).toBe(200);
    entries = listed.json.data;
    if (done(entries)) return entries;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no ${kind} log entries for ${name} ${query}: ${JSON.stringify(entries)}`);
}

describe('provider webhooks in, customer webhooks out', () => {
  it('forward exactly the spec fields, signed, to the environment URL; the SDK verifies the delivery', async () => {
    const payload = { marker: 'matched-by-query', event: 'contact.updated', nested: { a: [1, 2] } };
    const response = await sendProviderWebhook(stack, env.publicId, payload, { secret: env.webhookSecret, query: '?serviceConnectionId=conn-1' });
    expect(response.status).toBe(200);
    const [delivery] = await receiver.waitFor(marked('matched-by-query'));
    expect(delivery!.json).toStrictEqual({ from: 'acme', providerConfigKey: 'acme', type: 'forward', connectionId: 'conn-1', payload });
    expect(delivery!.headers['webhook-id']).toMatch(/^msg_/);
    expect(delivery!.headers['webhook-signature']).toMatch(/^v1,/);

    const sdk = new Latchkey({ host: stack.url, apiKey: env.apiKey, webhookSigningKey: env.signingKey });
    const headers = delivery!.headers as Record<string, string>;
    expect(sdk.verifyIncomingWebhookRequest(delivery!.body, headers)).toBe(true);
    expect(sdk.verifyIncomingWebhookRequest(delivery!.body.replace('contact.updated', 'contact.deleted'), headers)).toBe(false);
    expect(verifyWebhookSignature({ body: delivery!.body, headers, secret: env.signingKey, now: Date.now() + 6 * 60_000 })).toBe(false);
    // Not with the API key: this environment's signing key is its own.
    expect(new Latchkey({ host: stack.url, apiKey: env.apiKey }).verifyIncomingWebhookRequest(delivery!.body, headers)).toBe(false);

    // The attempt is recorded once the receiver has answered, and the operator sees it.
    const attempts = await webhookLog('hooks', 'attempts', `webhook_id=${headers['webhook-id']}`);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ webhook_id: headers['webhook-id'], target: 'primary', kind: 'forward', status: 200, error: null, attempt: 1, outcome: 'delivered' });
  });

  it('route by the body field serviceConnectionId and by the catalog rule', async () => {
    await sendProviderWebhook(stack, env.publicId, { marker: 'by-body', serviceConnectionId: 'conn-1' }, { secret: env.webhookSecret });
    await sendProviderWebhook(stack, env.publicId, { marker: 'by-rule', account: { id: 'acct-9' } }, { secret: env.webhookSecret });
    expect((await receiver.waitFor(marked('by-body')))[0]!.json.connectionId).toBe('conn-1');
    expect((await receiver.waitFor(marked('by-rule')))[0]!.json.connectionId).toBe('conn-1');
  });

  // JSON.parse takes any depth, JSON.stringify not: the announcement of a body nested 10,000
  // deep could not be written, so its job was retried for a day as if the bus were down, never
  // recorded, and enough of them held every environment's inbound webhooks up.
  it('forward and record a body nested 10,000 levels deep, as it came', async () => {
    const depth = 10_000;
    const text = `{"marker":"deep","nested":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    expect((await sendProviderText(stack, env.publicId, text, { secret: env.webhookSecret })).status).toBe(200);
    const [delivery] = await receiver.waitFor(marked('deep'));
    expect(delivery!.body).toContain(text);
    const webhookId = delivery!.headers['webhook-id'];
    const entries = await webhookLog('hooks', 'inbound', 'status=forwarded', (listed) => listed.some((one) => one.webhook_id === webhookId));
    expect(entries.find((one) => one.webhook_id === webhookId)).toMatchObject({ integration: 'acme', status: 'forwarded' });
  });

  it('forward an unmatched webhook without connectionId', async () => {
    await sendProviderWebhook(stack, env.publicId, { marker: 'unmatched', account: { id: 'nobody' } }, { secret: env.webhookSecret, query: '?serviceConnectionId=ghost' });
    const [delivery] = await receiver.waitFor(marked('unmatched'));
    expect(delivery!.json).toStrictEqual({ from: 'acme', providerConfigKey: 'acme', type: 'forward', payload: { marker: 'unmatched', account: { id: 'nobody' } } });
  });

  it("name the provider in `from` and the integration in `providerConfigKey`, when the integration's key is its own", async () => {
    await env.api('POST', '/integrations', { provider: 'acme', unique_key: 'acme-eu', forward_webhooks: true });
    const secret = (await env.api('GET', '/integrations/acme-eu?include=webhook')).json.data.webhookSecret as string;
    const sent = await sendProviderWebhook(stack, env.publicId, { marker: 'second-integration' }, { secret, integration: 'acme-eu' });
    expect(sent.status).toBe(200);
    const [delivery] = await receiver.waitFor(marked('second-integration'));
    expect(delivery!.json).toStrictEqual({ from: 'acme', providerConfigKey: 'acme-eu', type: 'forward', payload: { marker: 'second-integration' } });
  });

  it('reject a bad or missing signature and forward nothing', async () => {
    expect((await sendProviderWebhook(stack, env.publicId, { marker: 'forged' }, { secret: 'not-the-secret' })).status).toBe(200);
    expect((await sendProviderWebhook(stack, env.publicId, { marker: 'unsigned' })).status).toBe(200);
    // A good one sent after both: once it is in, the router has handled the two before it.
    await sendProviderWebhook(stack, env.publicId, { marker: 'after-forged' }, { secret: env.webhookSecret });
    await receiver.waitFor(marked('after-forged'));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received.filter(marked('forged'))).toHaveLength(0);
    expect(receiver.received.filter(marked('unsigned'))).toHaveLength(0);
    // The operator sees why.
    const rejected = await webhookLog('hooks', 'inbound', 'status=rejected', (entries) => entries.length >= 2);
    expect(rejected.map((entry) => entry.reason).sort()).toEqual(['bad_signature', 'missing_signature']);
    expect(rejected.every((entry) => entry.integration === 'acme' && entry.webhook_id === null)).toBe(true);
  });

  it('forward nothing when the integration has forward_webhooks false', async () => {
    expect((await sendProviderWebhook(stack, quiet.publicId, { marker: 'quiet' }, { secret: quiet.webhookSecret })).status).toBe(200);
    const [entry] = await webhookLog('quiet', 'inbound', 'status=not_forwarded');
    expect(entry.reason).toBe('forward_webhooks_off');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.filter(marked('quiet'))).toHaveLength(0);
  });

  it('answer 404 for an unknown environment and 400 for a bad integration name', async () => {
    const unknown = await sendProviderWebhook(stack, 'nope', { marker: 'x' }, { secret: env.webhookSecret });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as any).error.code).toBe('unknown_environment');
    const bad = await sendProviderWebhook(stack, env.publicId, {}, { integration: '-bad' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.code).toBe('invalid_uri_params');
    const huge = await sendProviderWebhook(stack, env.publicId, { marker: 'huge', blob: 'x'.repeat(800 * 1024) }, { secret: env.webhookSecret });
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as any).error.code).toBe('payload_too_large');
  });

  it('give up at once on a 4xx other than 408/429, after one recorded attempt', async () => {
    receiver.answerWith((body) => (body.includes('refused-by-receiver') ? 410 : 200));
    await sendProviderWebhook(stack, env.publicId, { marker: 'refused-by-receiver' }, { secret: env.webhookSecret });
    const [attempt] = await webhookLog('hooks', 'attempts', 'outcome=failed');
    receiver.answerWith(200);
    expect(attempt).toMatchObject({ attempt: 1, status: 410, kind: 'forward', target: 'primary' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await env.admin('GET', `/environments/hooks/webhooks/attempts?webhook_id=${attempt.webhook_id}`)).json.data).toHaveLength(1);
  });
});

describe('the operator\'s webhook log', () => {
  it('pages back newest first, validates its query, and is for operators only', async () => {
    const [newest, older] = await webhookLog('hooks', 'inbound', 'limit=2', (entries) => entries.length === 2);
    expect(Date.parse(newest.received_at)).toBeGreaterThanOrEqual(Date.parse(older.received_at));
    const back = await env.admin('GET', `/environments/hooks/webhooks/inbound?limit=1&before=${encodeURIComponent(newest.received_at)}`);
    expect(back.json.data).toHaveLength(1);
    expect(Date.parse(back.json.data[0].received_at)).toBeLessThan(Date.parse(newest.received_at));

    const unknown = await env.admin('GET', '/environments/nope/webhooks/attempts');
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('unknown_environment');
    for (const query of ['limit=0', 'limit=1001', 'status=lost', 'before=yesterday']) {
      const bad = await env.admin('GET', `/environments/hooks/webhooks/inbound?${query}`);
      expect(bad.status).toBe(400);
      expect(bad.json.error.code).toBe('invalid_query_params');
    }
    expect((await env.admin('GET', '/environments/hooks/webhooks/attempts?outcome=lost')).status).toBe(400);
    // A customer key is not an operator's.
    const customer = await fetch(`${stack.url}/admin/environments/hooks/webhooks/attempts`, { headers: { authorization: `Bearer ${env.apiKey}` } });
    expect(customer.status).toBe(401);
    // Attempts never carry a body.
    const attempts = await env.admin('GET', '/environments/hooks/webhooks/attempts');
    expect(JSON.stringify(attempts.json)).not.toContain('matched-by-query');
  });
});

describe('auth webhooks and signing keys', () => {
  it('announce a connection made through a connect flow, with its tags', async () => {
    const { token } = (await env.api('POST', '/connect/sessions', { tags: { end_user_id: 'u-7' } })).json.data;
    const saved = await fetch(`${stack.url}/api-auth/api-key/acme?connect_session_token=${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiKey: 'end-user-key' }),
    });
    const { connectionId } = (await saved.json()) as { connectionId: string };
    const [auth] = await receiver.waitFor((item) => item.json?.type === 'auth' && item.json.connectionId === connectionId);
    expect(auth!.json).toStrictEqual({
      type: 'auth',
      operation: 'creation',
      success: true,
      connectionId,
      providerConfigKey: 'acme',
      provider: 'acme',
      environment: 'hooks',
      tags: { end_user_id: 'u-7' },
    });
  });

  it('announce a failed refresh with success false and the error', async () => {
    await env.api('POST', '/integrations', { provider: 'acme-oauth', unique_key: 'acme-oauth', credentials: { client_id: 'id', client_secret: 'secret' } });
    await env.api('POST', '/connections', {
      provider_config_key: 'acme-oauth',
      connection_id: 'stale',
      tags: { team: 'blue' },
      credentials: { type: 'OAUTH2', access_token: 'old', refresh_token: 'rt-secret-123', expires_at: new Date(Date.now() - 60_000).toISOString(), raw: {} },
    });
    expect((await env.api('GET', '/connections/stale?provider_config_key=acme-oauth')).status).toBe(424);
    const [auth] = await receiver.waitFor((item) => item.json?.type === 'auth' && item.json.connectionId === 'stale');
    expect(auth!.json).toMatchObject({
      type: 'auth',
      operation: 'refresh',
      success: false,
      providerConfigKey: 'acme-oauth',
      provider: 'acme-oauth',
      environment: 'hooks',
      tags: { team: 'blue' },
      error: { type: 'refresh_token_external_error' },
    });
    expect(JSON.stringify(auth!.json)).not.toContain('rt-secret-123');
  });

  it('sign with both the new and the old key for a day after a rotation', async () => {
    const rotated = await env.admin('POST', '/environments/hooks/webhook-signing-key/rotate');
    const fresh = rotated.json.data.signing_key as string;
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // the router trusts what it read for 2 s
    await sendProviderWebhook(stack, env.publicId, { marker: 'after-rotation' }, { secret: env.webhookSecret });
    const [delivery] = await receiver.waitFor(marked('after-rotation'));
    const headers = delivery!.headers as Record<string, string>;
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(new Latchkey({ apiKey: env.apiKey, webhookSigningKey: fresh }).verifyIncomingWebhookRequest(delivery!.body, headers)).toBe(true);
    expect(new Latchkey({ apiKey: env.apiKey, webhookSigningKey: env.signingKey }).verifyIncomingWebhookRequest(delivery!.body, headers)).toBe(true);
  });
});

describe('a secondary webhook URL', () => {
  it('gets the same webhook, under the same webhook-id, as the primary', async () => {
    const second = await startReceiver();
    try {
      expect((await env.admin('PATCH', '/environments/hooks', { webhook_url_secondary: second.url })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 2_100)); // the router trusts what it read for 2 s
      await sendProviderWebhook(stack, env.publicId, { marker: 'both' }, { secret: env.webhookSecret });
      const [primary] = await receiver.waitFor(marked('both'));
      const [secondary] = await second.waitFor(marked('both'));
      expect(secondary!.body).toBe(primary!.body);
      expect(secondary!.headers['webhook-id']).toBe(primary!.headers['webhook-id']);
    } finally {
      await env.admin('PATCH', '/environments/hooks', { webhook_url_secondary: null });
      await second.close();
    }
  });
});
