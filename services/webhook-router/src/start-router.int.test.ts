import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createBus, type Bus } from '@latchkey/bus';
import { STREAMS, gatewayContracts, vaultWebhookContracts, webhookContracts, type PayloadOf, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, startMongo, startNats, type TestMongo, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startRouter } from './start-router.js';

type Received = PayloadOf<typeof webhookContracts.received>;

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let mongo: TestMongo;
let router: RunningService<void>;
let gateway: Bus;
let neighbours: Bus[];
let observer: Bus;
const heard: Received[] = [];
const WEBHOOK_SECRET = `whsec-${randomUUID()}`;

const login = (service: ServiceName | 'observer') => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // The router's neighbours, played by the services they are: the gateway knows environment
  // `pub_a` (no webhook URL: nothing is forwarded), the vault its integration `acme` (which takes
  // unsigned webhooks) and connection `conn-1`.
  gateway = await login('gateway');
  // And `pub_b`, whose webhooks go to a URL nobody answers on.
  gateway.serve(gatewayContracts.getEnvironment, (request) => ({
    id: 'public_id' in request && request.public_id === 'pub_b' ? 'env_b' : 'env_a',
    public_id: 'public_id' in request ? request.public_id : 'pub_a',
    name: 'dev',
    account_id: 'acc_a',
    webhook_url: 'public_id' in request && request.public_id === 'pub_b' ? 'http://127.0.0.1:9/hook' : null,
    webhook_url_secondary: null,
    send_auth_webhooks: false,
    callback_url: null,
    variables: [],
  }));
  const vault = await login('credential-vault');
  vault.serve(vaultWebhookContracts.webhookIntegration, (request) => ({
    provider: 'acme',
    forward_webhooks: request.environment_id === 'env_b',
    accept_unsigned_webhooks: true,
    webhook_secret: WEBHOOK_SECRET,
    signature: null,
    routing: null,
  }));
  vault.serve(vaultWebhookContracts.matchConnections, ({ lookups }) => ({
    connection_ids: lookups.map((by) => ('connection_id' in by && by.connection_id === 'conn-1' ? 'conn-1' : null)),
  }));
  neighbours = [gateway, vault];
  await Promise.all(neighbours.map((bus) => bus.flush()));
  observer = await login('observer');
  observer.subscribeRaw(webhookContracts.received.subject, (message) => heard.push(JSON.parse(Buffer.from(message.data).toString()) as Received));
  await observer.flush();

  // The router itself, wired as main.ts wires it.
  const config = configSchema.parse(serviceEnvironment('webhook-router', nats, mongo.uri));
  router = await runService({ service: 'webhook-router', config, start: startRouter, handleSignals: false });
}, 60_000);

afterAll(async () => {
  await observer?.drain();
  await router?.runtime.mongo.dropDatabase().catch(() => undefined);
  await router?.shutdown();
  await Promise.all((neighbours ?? []).map((bus) => bus.drain()));
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});


describe('webhook.received', () => {
  // For the functions runtime, not for users: the e2e suite sees it only through the onWebhook
  // functions it starts (functions.e2e.test.ts) and the forwarded webhooks.
  it('announces a routed provider webhook with its connection and payload, and an unmatched one with connection_id null; no secret rides along', async () => {
    const send = (marker: string, query: Record<string, string>) =>
      // Persisted on JOBS as the gateway does when a provider webhook comes in.
      gateway.enqueue(webhookContracts.inbound, {
        id: `iwh_${randomUUID().replaceAll('-', '')}`,
        environment_public_id: 'pub_a',
        integration: 'acme',
        query,
        headers: { 'content-type': 'application/json' },
        body_base64: Buffer.from(JSON.stringify({ marker, event: 'contact.updated' })).toString('base64'),
        received_at: new Date().toISOString(),
      });
    await send('matched', { serviceConnectionId: 'conn-1' });
    await send('unmatched', {});
    const matched = await eventually(() => heard.find((event) => (event.payload as { marker?: string } | undefined)?.marker === 'matched'), 10_000, 'the matched webhook.received', 50);
    expect(matched).toMatchObject({ environment_id: 'env_a', provider_config_key: 'acme', provider: 'acme', connection_id: 'conn-1', payload: { marker: 'matched', event: 'contact.updated' } });
    const unmatched = await eventually(() => heard.find((event) => (event.payload as { marker?: string } | undefined)?.marker === 'unmatched'), 10_000, 'the unmatched webhook.received', 50);
    expect(unmatched.connection_id).toBeNull();
    expect(JSON.stringify(heard)).not.toContain(WEBHOOK_SECRET);
  }, 30_000);

  // A batch handled again (its records' insert failed after the publish, or the publish's
  // acknowledgement was lost) published it again, and the syncs' onWebhook ran twice.
  it('is published once per inbound webhook: its message id is the inbound id', async () => {
    const id = `iwh_${randomUUID().replaceAll('-', '')}`;
    await gateway.enqueue(webhookContracts.inbound, {
      id,
      environment_public_id: 'pub_a',
      integration: 'acme',
      query: { serviceConnectionId: 'conn-1' },
      headers: { 'content-type': 'application/json' },
      body_base64: Buffer.from(JSON.stringify({ event: 'contact.deleted' })).toString('base64'),
      received_at: new Date().toISOString(),
    });
    await eventually(() => heard.find((event) => event.inbound_id === id), 10_000, 'its webhook.received', 50);
    const js = (await observer.jetstreamManager()).jetstream();
    const consumer = await js.consumers.get(STREAMS.events.name, { filter_subjects: webhookContracts.received.subject });
    const msgIds = new Map<string, string | undefined>();
    for await (const msg of await consumer.fetch({ max_messages: 100, expires: 1000 })) {
      msgIds.set(msg.json<Received>().inbound_id, msg.headers?.get('Nats-Msg-Id'));
      if (msg.info.pending === 0) break;
    }
    expect(msgIds.get(id)).toBe(`received-${id}`);
  }, 30_000);
});

describe('an inbound webhook the router cannot handle yet', () => {
  // The gateway answered the provider 200 once JetStream stored it: a vault or database away for
  // an hour must not make the router give it up after a quarter of an hour of retries.
  it('is retried for a day before it is given up', async () => {
    const jsm = await observer.jetstreamManager();
    const { config } = await jsm.consumers.info(STREAMS.jobs.name, 'webhook-router-inbound');
    expect(config.max_deliver).toBeGreaterThanOrEqual(24 * 60);
  });
});

describe('the events that make customer webhooks', () => {
  // A connection's creation, a failed refresh, a finished action or sync run: enqueueing its
  // webhook waits for the gateway and JOBS; an outage of an hour must not drop it.
  it('are retried for a day before they are given up', async () => {
    const jsm = await observer.jetstreamManager();
    const durables = ['webhook-router-auth-created', 'webhook-router-auth-refresh-failed', 'webhook-router-async-actions', 'webhook-router-sync-completed'];
    const caps = await Promise.all(durables.map(async (durable) => [durable, (await jsm.consumers.info(STREAMS.events.name, durable)).config.max_deliver] as const));
    expect(caps.filter(([, cap]) => (cap ?? 0) < 24 * 60)).toEqual([]);
  });
});

describe('a provider webhook too large to forward once escaped', () => {
  // The gateway bounds the raw body; forwarded as JSON text, a control byte takes six bytes and
  // the delivery job outgrew what NATS takes: retried as if the bus were away, then given up.
  it('is recorded as not forwarded, payload_too_large, instead of being retried', async () => {
    const id = `iwh_${randomUUID().replaceAll('-', '')}`;
    await gateway.enqueue(webhookContracts.inbound, {
      id,
      environment_public_id: 'pub_b',
      integration: 'acme',
      query: {},
      headers: { 'content-type': 'application/octet-stream' },
      body_base64: Buffer.alloc(200 * 1024, 1).toString('base64'),
      received_at: new Date().toISOString(),
    });
    const logged = await eventually(
      async () => (await gateway.request(webhookContracts.listInbound, { environment_id: 'env_b', limit: 10 })).data.find((entry) => entry.id === id),
      15_000,
      'the inbound log entry',
      100,
    );
    expect(logged).toMatchObject({ status: 'not_forwarded', reason: 'payload_too_large' });
  }, 30_000);
});
