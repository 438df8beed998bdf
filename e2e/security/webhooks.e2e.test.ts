import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHmac, randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { apiKeyProviderYaml, writeProvidersFile } from '../support/providers.js';
import { createScopedKey, http, startStack, type Stack } from '../support/stack.js';
import { ACME_PROVIDER_YAML, acmeSignature, sendProviderWebhook, startReceiver, webhookEnvironment, type Receiver } from '../support/webhooks.js';

/**
 * Inbound provider webhooks, attacked: forged unsigned webhooks for providers that the catalog
 * knows no signature scheme for (case 12), and replays of validly signed ones (case 14). The
 * attacker can reach the public webhook URL and has seen (or captured) real webhooks; the
 * customer's receiver counts what it gets. Canaries planted in a connection's credentials and in
 * the environment's variables must appear in no answer, log or NATS message.
 */

/** A provider with no `webhook` block: the spec's `x-plain-signature-256` is all it can sign with. */
const PLAIN_PROVIDER_YAML = apiKeyProviderYaml('http://127.0.0.1:9', 'plain');

/** A provider signing as Standard Webhooks does: HMAC over `{id}.{timestamp}.{body}`, base64, `v1,`. */
const STANDARD_PROVIDER_YAML = `${apiKeyProviderYaml('http://127.0.0.1:9', 'acme-std')}  webhook:
    signature_header: webhook-signature
    algorithm: sha256
    encoding: base64
    prefix: 'v1,'
    signed_content: '{id}.{timestamp}.{body}'
    timestamp_header: webhook-timestamp
    id_header: webhook-id
`;

const CREDENTIAL_CANARY = `canary-credential-${randomBytes(12).toString('hex')}`;
const VARIABLE_CANARY = `canary-variable-${randomBytes(12).toString('hex')}`;

let stack: Stack;
let receiver: Receiver;
let env: Awaited<ReturnType<typeof webhookEnvironment>>;
let routerDb: mongoose.Connection;
let plainSecret: string;
let standardSecret: string;
/** Every answer the gateway gave in this file, for the canary check. */
const answers: string[] = [];

const marked = (marker: string) => (item: { json: any }) => item.json?.payload?.marker === marker;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Posts raw bytes to the public webhook URL with the given headers; keeps the answer. */
async function post(integration: string, body: string, headers: Record<string, string>, query = ''): Promise<{ status: number; text: string }> {
  const response = await fetch(`${stack.url}/webhook/${env.publicId}/${integration}${query}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  answers.push(text);
  return { status: response.status, text };
}

const plainSignature = (secret: string, body: string) => createHmac('sha256', secret).update(body).digest('hex');

function standardHeaders(secret: string, id: string, seconds: number, body: string): Record<string, string> {
  const signature = createHmac('sha256', secret).update(`${id}.${seconds}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': String(seconds), 'webhook-signature': `v1,${signature}` };
}

/** The router's records of one integration's webhooks, once `count` of them match. */
async function recordsOf(filter: Record<string, unknown>, count: number): Promise<Array<Record<string, unknown>>> {
  for (let i = 0; i < 200; i++) {
    const docs = await routerDb.collection('inbound_webhooks').find(filter).toArray();
    if (docs.length >= count) return docs;
    await sleep(100);
  }
  throw new Error(`fewer than ${count} inbound records match ${JSON.stringify(filter)}`);
}

/** Every message of a JetStream stream so far, as text. */
async function streamText(stream: string): Promise<string[]> {
  const nc = await stack.connectNats();
  try {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.consumers.add(stream, { ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
    const consumer = await jetstream(nc).consumers.get(stream, info.name);
    const found: string[] = [];
    if (info.num_pending === 0) return found;
    const batch = await consumer.fetch({ max_messages: info.num_pending, expires: 3000 });
    for await (const msg of batch) {
      found.push(`${msg.subject} ${new TextDecoder().decode(msg.data)}`);
      if (found.length === info.num_pending) break;
    }
    return found;
  } finally {
    await nc.close();
  }
}

beforeAll(async () => {
  receiver = await startReceiver();
  stack = await startStack({
    serviceEnv: {
      'credential-vault': { PROVIDERS_FILE: writeProvidersFile(ACME_PROVIDER_YAML + PLAIN_PROVIDER_YAML + STANDARD_PROVIDER_YAML) },
      'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_RETRY_CAP_MS: '500' },
    },
  });
  env = await webhookEnvironment(stack, 'attacked', receiver.url);
  expect((await env.admin('PATCH', '/environments/attacked', { variables: [{ name: 'CANARY', value: VARIABLE_CANARY }] })).status).toBe(200);
  for (const [provider, key] of [['plain', 'plain'], ['acme-std', 'acme-std']] as const) {
    expect((await env.api('POST', '/integrations', { provider, unique_key: key })).status).toBe(201);
    const created = await env.api('POST', '/connections', { provider_config_key: key, connection_id: 'victim', credentials: { type: 'API_KEY', apiKey: CREDENTIAL_CANARY } });
    expect(created.status).toBe(201);
  }
  plainSecret = (await env.api('GET', '/integrations/plain?include=webhook')).json.data.webhookSecret;
  standardSecret = (await env.api('GET', '/integrations/acme-std?include=webhook')).json.data.webhookSecret;
  routerDb = mongoose.createConnection(stack.mongo.uri, { dbName: stack.dbName('webhook-router') });
  await routerDb.asPromise();
}, 90_000);

afterAll(async () => {
  await routerDb?.close();
  await stack?.dispose();
  await receiver?.close();
});

describe('inbound provider webhooks', () => {
  test('case 12: a forged unsigned webhook naming a connection, for a provider without a signature scheme, is refused: not forwarded, not announced, recorded with its reason', async () => {
    const forged = JSON.stringify({ marker: 'forged-unsigned', type: 'item.updated' });
    const signed = JSON.stringify({ marker: 'signed-after-forged', type: 'item.updated' });
    const refused = await post('plain', forged, {}, '?serviceConnectionId=victim');
    const accepted = await post('plain', signed, { 'x-plain-signature-256': plainSignature(plainSecret, signed) }, '?serviceConnectionId=victim');
    // The gateway verifies nothing: both get the same quick answer, which tells the sender nothing.
    expect(refused).toEqual({ status: 200, text: '{"success":true}' });
    expect(accepted).toEqual(refused);

    await receiver.waitFor(marked('signed-after-forged'));
    const [record] = await recordsOf({ integration: 'plain', status: 'rejected' }, 1);
    expect(record).toMatchObject({ reason: 'unsigned_not_accepted', signature: 'unsigned', connection_id: null, webhook_id: null });
    await sleep(500);
    expect(receiver.received.filter(marked('forged-unsigned'))).toHaveLength(0);
    // Not announced, so no sync's onWebhook sees it.
    const received = (await streamText('EVENTS')).filter((message) => message.startsWith('events.webhook.received'));
    expect(received.some((message) => message.includes('forged-unsigned'))).toBe(false);
    expect(received.some((message) => message.includes('signed-after-forged'))).toBe(true);
  });

  test("case 12: the same provider's webhook signed with the integration's secret (x-<provider>-signature-256) is forwarded with its connection", async () => {
    const body = JSON.stringify({ marker: 'spec-signed' });
    expect((await post('plain', body, { 'x-plain-signature-256': `sha256=${plainSignature(plainSecret, body)}` }, '?serviceConnectionId=victim')).status).toBe(200);
    const [delivery] = await receiver.waitFor(marked('spec-signed'));
    expect(delivery!.json).toStrictEqual({ from: 'plain', providerConfigKey: 'plain', type: 'forward', connectionId: 'victim', payload: { marker: 'spec-signed' } });
  });

  test('case 12: accept_unsigned_webhooks is off by default, set knowingly on update (and create), returned on get; then unsigned webhooks pass but wrongly signed ones still do not', async () => {
    const read = async (key: string) => (await env.api('GET', `/integrations/${key}`)).json.data.accept_unsigned_webhooks;
    expect(await read('plain')).toBe(false);
    expect((await env.api('POST', '/integrations', { provider: 'plain', unique_key: 'plain-open', accept_unsigned_webhooks: true })).status).toBe(201);
    expect(await read('plain-open')).toBe(true);
    expect((await env.api('PATCH', '/integrations/plain', { accept_unsigned_webhooks: 'yes' })).status).toBe(400);
    expect((await env.api('PATCH', '/integrations/plain', { accept_unsigned_webhooks: true })).status).toBe(200);
    expect(await read('plain')).toBe(true);
    await sleep(2_100); // the router trusts what it read of an integration for 2 s

    const unsigned = JSON.stringify({ marker: 'unsigned-accepted' });
    const forged = JSON.stringify({ marker: 'forged-with-unsigned-on' });
    await post('plain', forged, { 'x-plain-signature-256': plainSignature('not-the-secret', forged) }, '?serviceConnectionId=victim');
    await post('plain', unsigned, {}, '?serviceConnectionId=victim');
    expect((await receiver.waitFor(marked('unsigned-accepted')))[0]!.json.connectionId).toBe('victim');
    await recordsOf({ integration: 'plain', reason: 'bad_signature' }, 1);
    expect(receiver.received.filter(marked('forged-with-unsigned-on'))).toHaveLength(0);

    expect((await env.api('PATCH', '/integrations/plain', { accept_unsigned_webhooks: false })).status).toBe(200);
    expect(await read('plain')).toBe(false);
  });

  test("case 12: turning accept_unsigned_webhooks on takes the scope that reads the integration's credentials, as its webhook secret does", async () => {
    const updater = await createScopedKey(stack, ['environment:integrations:update', 'environment:integrations:create'], 'attacked');
    for (const [method, path, body] of [
      ['PATCH', '/integrations/plain', { accept_unsigned_webhooks: true }],
      ['POST', '/integrations', { provider: 'plain', unique_key: 'plain-forged', accept_unsigned_webhooks: true }],
    ] as const) {
      const refused = await http(`${stack.url}${path}`, { method, token: updater, body });
      expect({ status: refused.status, code: refused.json.error?.code, scope: refused.json.error?.payload?.scope }).toEqual({
        status: 403,
        code: 'forbidden',
        scope: 'environment:integrations:read_credentials',
      });
    }
    expect((await env.api('GET', '/integrations/plain')).json.data.accept_unsigned_webhooks).toBe(false);
    expect((await env.api('GET', '/integrations/plain-forged')).status).toBe(404);
    // Turning it off, or other changes, need no more than the update scope.
    expect((await http(`${stack.url}/integrations/plain`, { method: 'PATCH', token: updater, body: { accept_unsigned_webhooks: false } })).status).toBe(200);
  });

  test('case 12: a provider whose catalog entry signs has its unsigned webhook refused even with accept_unsigned_webhooks on', async () => {
    expect((await env.api('PATCH', '/integrations/acme', { accept_unsigned_webhooks: true })).status).toBe(200);
    await sleep(2_100);
    await sendProviderWebhook(stack, env.publicId, { marker: 'acme-unsigned' }, { query: '?serviceConnectionId=victim' });
    await sendProviderWebhook(stack, env.publicId, { marker: 'acme-signed' }, { secret: env.webhookSecret });
    await receiver.waitFor(marked('acme-signed'));
    await recordsOf({ integration: 'acme', reason: 'missing_signature' }, 1);
    expect(receiver.received.filter(marked('acme-unsigned'))).toHaveLength(0);
    expect((await env.api('PATCH', '/integrations/acme', { accept_unsigned_webhooks: false })).status).toBe(200);
  });

  test('case 14: a signed webhook replayed three times is forwarded once', async () => {
    const body = JSON.stringify({ marker: 'replayed', account: { id: 'acct-1' } });
    const headers = { 'x-acme-signature-256': acmeSignature(env.webhookSecret, body) };
    for (let i = 0; i < 4; i++) expect((await post('acme', body, headers, '?serviceConnectionId=victim')).status).toBe(200);
    await recordsOf({ integration: 'acme', reason: 'replayed' }, 3);
    await sleep(500);
    expect(receiver.received.filter(marked('replayed'))).toHaveLength(1);
  });

  test('case 14: a replay after the router restarted is still refused (the claims are durable)', async () => {
    const body = JSON.stringify({ marker: 'replayed-across-restart' });
    const headers = { 'x-acme-signature-256': acmeSignature(env.webhookSecret, body) };
    await post('acme', body, headers);
    await receiver.waitFor(marked('replayed-across-restart'));
    await stack.restart('webhook-router');
    await post('acme', body, headers);
    await recordsOf({ integration: 'acme', reason: 'replayed' }, 4);
    await sleep(500);
    expect(receiver.received.filter(marked('replayed-across-restart'))).toHaveLength(1);
  });

  test('case 14: a validly signed webhook whose timestamp is outside the 5-minute window is refused', async () => {
    const now = Math.floor(Date.now() / 1000);
    const old = JSON.stringify({ marker: 'stale' });
    const future = JSON.stringify({ marker: 'from-the-future' });
    const fresh = JSON.stringify({ marker: 'fresh' });
    await post('acme-std', old, standardHeaders(standardSecret, 'msg_stale', now - 10 * 60, old));
    await post('acme-std', future, standardHeaders(standardSecret, 'msg_future', now + 10 * 60, future));
    await post('acme-std', fresh, standardHeaders(standardSecret, 'msg_fresh', now, fresh));
    await receiver.waitFor(marked('fresh'));
    const stale = await recordsOf({ integration: 'acme-std', reason: 'stale_timestamp' }, 2);
    expect(stale.map((doc) => doc['signature'])).toEqual(['stale', 'stale']);
    expect(receiver.received.filter((item) => marked('stale')(item) || marked('from-the-future')(item))).toHaveLength(0);
  });

  test('case 14: two webhooks with equal bodies but different delivery ids are both forwarded; a replay of either, even re-timed by the provider, is not', async () => {
    const now = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ marker: 'same-body', serviceConnectionId: 'victim' });
    const first = standardHeaders(standardSecret, 'msg_one', now, body);
    await post('acme-std', body, first);
    await post('acme-std', body, standardHeaders(standardSecret, 'msg_two', now, body));
    await post('acme-std', body, first);
    // The provider's own retry of msg_one carries a new timestamp and signature: still msg_one.
    await post('acme-std', body, standardHeaders(standardSecret, 'msg_one', now + 5, body));
    await recordsOf({ integration: 'acme-std', reason: 'replayed' }, 2);
    await sleep(500);
    const deliveries = receiver.received.filter(marked('same-body'));
    expect(deliveries).toHaveLength(2);
    expect(deliveries.every((item) => item.json.connectionId === 'victim')).toBe(true);
  });

  test('cases 12 and 14: the webhook secrets and the canaries appear in no answer, log, record or NATS message', async () => {
    const secrets = [CREDENTIAL_CANARY, VARIABLE_CANARY, env.webhookSecret, plainSecret, standardSecret];
    const logs = [...stack.services, ...stack.gateways].map((proc) => proc.output()).join('\n');
    const nats = [...(await streamText('EVENTS')), ...(await streamText('JOBS'))].join('\n');
    // The inbound log, and the replay claims of every window.
    const routerCollections = (await routerDb.db!.listCollections({}, { nameOnly: true }).toArray()).map(({ name }) => name).filter((name) => name.startsWith('inbound_webhook'));
    expect(routerCollections.filter((name) => name.startsWith('inbound_webhook_claims_')).length).toBeGreaterThan(0);
    const records = (await Promise.all(routerCollections.map(async (name) => JSON.stringify(await routerDb.collection(name).find({}).toArray())))).join('\n');
    const delivered = receiver.received.map((item) => item.body).join('\n');
    for (const secret of secrets) {
      for (const [where, text] of Object.entries({ answers: answers.join('\n'), logs, nats, records, delivered })) {
        expect(`${where}: ${text.includes(secret)}`).toBe(`${where}: false`);
      }
    }
  });
});
