import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Connection } from 'mongoose';
import type { JobMessage } from '@latchkey/bus';
import type { EnvironmentInfo, WebhookDelivery } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { createAddressPolicy, parseCidrList } from '@latchkey/net';
import { startFerretDb, startMongo, type TestMongo, uniqueDbName } from '@latchkey/testing';
import { createDeliveryRepo, type DeliveryRepo } from '../db/delivery-repo.js';
import { createParkedDeliveryRepo } from '../db/parked-delivery-repo.js';
import { createWebhookSender, type WebhookSender } from '../delivery/send-webhook.js';
import { createCircuitBreakers } from '../domain/circuit-breaker.js';
import { createDestinationSlots } from '../domain/destination-slots.js';
import { deliverWebhookHandler } from './deliver-webhook.js';

const logger = createLogger({ service: 'test', silent: true });
let mongo: TestMongo;
let connection: Connection;
let receiver: Server;
let url: string;
const received: string[] = [];

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('deliver'), logger });
  receiver = createServer((req, res) => {
    received.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => res.writeHead(200).end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
}, 60_000);

afterAll(async () => {
  await connection?.close();
  await mongo?.dispose();
  await new Promise((resolve) => receiver?.close(resolve));
});

/** A message as JetStream hands it over the `deliveryCount`-th time (only its count is read). */
const delivery = (deliveryCount: number) => ({ info: { deliveryCount } }) as unknown as JobMessage;

/** The environments' webhook URLs as the gateway has them now (an operator may change them). */
const webhookUrls = new Map<string, { primary: string | null; secondary: string | null }>();
const environmentById = async (id: string): Promise<EnvironmentInfo> => ({
  id,
  public_id: `pub_${id}`,
  name: 'dev',
  account_id: 'acc_a',
  webhook_url: webhookUrls.get(id)?.primary ?? null,
  webhook_url_secondary: webhookUrls.get(id)?.secondary ?? null,
  send_auth_webhooks: false,
  callback_url: null,
  variables: [],
});

/** The handler over a real delivery store and sender; `parkAfterMs` 0 parks every retry. */
const handlerOver = (deliveries: DeliveryRepo, sender: WebhookSender, parkAfterMs = 5_000) =>
  deliverWebhookHandler({
    logger,
    deliveries,
    sender,
    breakers: createCircuitBreakers({ threshold: 5, cooldownMs: 1000 }),
    destinations: createDestinationSlots({ perUrl: 8, waitMs: 1_000 }),
    signingKeys: async () => [`whsec_${Buffer.alloc(32, 1).toString('base64')}`],
    environmentById,
    parked: createParkedDeliveryRepo(connection, { slotMs: 100 }),
    // By default retries wait in JetStream here (none is parked but what an open circuit holds).
    retry: { baseMs: 100, capMs: 1000, windowMs: 60_000, parkAfterMs },
    // The operations log is not what these tests look at.
    operations: { record: () => undefined },
  });
const loopbackSender = () => createWebhookSender({ policy: createAddressPolicy({ allowCidrs: parseCidrList('127.0.0.1/32') }), timeoutMs: 5000 });

it('does not send a webhook again when JetStream hands over a delivery whose ack was lost', async () => {
  const deliveries = createDeliveryRepo(connection);
  await deliveries.init();
  const sender = loopbackSender();
  const handle = handlerOver(deliveries, sender);
  webhookUrls.set('env_a', { primary: url, secondary: null });
  const job: WebhookDelivery = { webhook_id: 'msg_once', environment_id: 'env_a', target: 'primary', url, kind: 'forward', body: '{"n":1}', created_at: new Date().toISOString() };

  await expect(handle(job, delivery(1))).resolves.toBeUndefined();
  expect(received).toEqual(['msg_once']);
  // Delivered and recorded, but the ack never reached JetStream (the node died): it comes back.
  await expect(handle(job, delivery(2))).resolves.toBeUndefined();
  expect(received).toEqual(['msg_once']);
  // Again, handed over a few more times meanwhile (those holders died before looking).
  await expect(handle(job, delivery(5))).resolves.toBeUndefined();
  expect(received).toEqual(['msg_once']);
  sender.close();
}, 30_000);

it('records a delivery the receiver took while the database went away, once it is back, instead of sending it again', async () => {
  const ferret = await startFerretDb();
  const outage = await connectMongo({ uri: ferret.uri, dbName: uniqueDbName('deliver_outage'), logger, serverSelectionTimeoutMs: 1_000 });
  const sent: string[] = [];
  let restarting: Promise<void> | undefined;
  // The receiver takes the webhook; the database dies before the attempt is recorded.
  const dying = createServer((req, res) => {
    sent.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => {
      restarting = ferret.restart(3_000);
      setTimeout(() => res.writeHead(204).end(), 300);
    });
  });
  await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', resolve));
  const sender = loopbackSender();
  try {
    const deliveries = createDeliveryRepo(outage);
    await deliveries.init();
    const handle = handlerOver(deliveries, sender);
    webhookUrls.set('env_outage', { primary: `http://127.0.0.1:${(dying.address() as AddressInfo).port}/hooks`, secondary: null });
    const job: WebhookDelivery = {
      webhook_id: 'msg_outage',
      environment_id: 'env_outage',
      target: 'primary',
      url: `http://127.0.0.1:${(dying.address() as AddressInfo).port}/hooks`,
      kind: 'forward',
      body: '{"n":2}',
      created_at: new Date().toISOString(),
    };
    // Acked once recorded (the handler resolves): JetStream does not hand it over again.
    await expect(handle(job, delivery(1))).resolves.toBeUndefined();
    await restarting;
    // Had it been handed over anyway, the record says it was delivered.
    await expect(handle(job, delivery(2))).resolves.toBeUndefined();
    expect(sent).toEqual(['msg_outage']);
  } finally {
    sender.close();
    await new Promise((resolve) => dying.close(resolve));
    await outage.close();
    await ferret.dispose();
  }
}, 60_000);

it('closes the circuit when its probe gets a final answer, so the URL is not held for the rest of the retry window', async () => {
  const deliveries = createDeliveryRepo(connection);
  await deliveries.init();
  // Down (503) until the circuit opens, then up, refusing the probe's webhook for good (400)
  // and taking the next one.
  const answers = [503, 503, 503, 503, 503, 400, 200];
  const seen: string[] = [];
  const flaky = createServer((req, res) => {
    seen.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => res.writeHead(answers.shift() ?? 200).end());
  });
  await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
  const sender = loopbackSender();
  try {
    const handle = handlerOver(deliveries, sender);
    webhookUrls.set('env_flaky', { primary: `http://127.0.0.1:${(flaky.address() as AddressInfo).port}/hooks`, secondary: null });
    const job = (id: string): WebhookDelivery => ({
      webhook_id: id,
      environment_id: 'env_flaky',
      target: 'primary',
      url: `http://127.0.0.1:${(flaky.address() as AddressInfo).port}/hooks`,
      kind: 'forward',
      body: '{"n":3}',
      created_at: new Date().toISOString(),
    });
    for (let i = 1; i <= 5; i++) expect(await handle(job('msg_down'), delivery(i))).toHaveProperty('retryInMs');
    // Open: held without an attempt (acked, parked until the circuit lets one go).
    await expect(handle(job('msg_held'), delivery(1))).resolves.toBeUndefined();
    expect(seen).toHaveLength(5);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    // The cooldown is over: this one probes, and the receiver refuses it for good.
    await expect(handle(job('msg_refused'), delivery(1))).resolves.toBeUndefined();
    // The URL answered: the next delivery goes at once, not held as if the probe were still out.
    await expect(handle(job('msg_next'), delivery(1))).resolves.toBeUndefined();
    expect(seen.slice(5)).toEqual(['msg_refused', 'msg_next']);
  } finally {
    sender.close();
    await new Promise((resolve) => flaky.close(resolve));
  }
}, 30_000);

it('does not send again a delivery made again once JetStream forgot the first copy (past its duplicate window)', async () => {
  const deliveries = createDeliveryRepo(connection);
  const sender = loopbackSender();
  const handle = handlerOver(deliveries, sender);
  webhookUrls.set('env_again', { primary: url, secondary: null });
  const job: WebhookDelivery = { webhook_id: 'msg_again', environment_id: 'env_again', target: 'primary', url, kind: 'forward', body: '{"n":4}', created_at: new Date().toISOString() };
  await expect(handle(job, delivery(1))).resolves.toBeUndefined();
  // The same delivery, enqueued again minutes later: a new message, delivered for the first time.
  await expect(handle(job, delivery(1))).resolves.toBeUndefined();
  expect(received.filter((id) => id === 'msg_again')).toEqual(['msg_again']);
  sender.close();
}, 30_000);

describe("a delivery whose environment's webhook URL changed since it was made", () => {
  it('goes to the URL the environment has now (an operator moved it to a fallback)', async () => {
    const deliveries = createDeliveryRepo(connection);
    const sender = loopbackSender();
    const handle = handlerOver(deliveries, sender);
    // Made for a URL nobody answers on; the environment's primary URL is the receiver's now.
    const gone = 'http://127.0.0.1:9/hooks';
    webhookUrls.set('env_moved', { primary: url, secondary: null });
    const job: WebhookDelivery = { webhook_id: 'msg_moved', environment_id: 'env_moved', target: 'primary', url: gone, kind: 'forward', body: '{"n":5}', created_at: new Date().toISOString() };
    await expect(handle(job, delivery(3))).resolves.toBeUndefined();
    expect(received).toContain('msg_moved');
    const [attempt] = await deliveries.attemptsOf(environmentId('env_moved'), 'msg_moved:primary');
    expect(attempt).toMatchObject({ url, outcome: 'delivered' });
    sender.close();
  }, 30_000);

  it('is sent nowhere once the URL was removed, and recorded failed', async () => {
    const deliveries = createDeliveryRepo(connection);
    const sender = loopbackSender();
    const handle = handlerOver(deliveries, sender);
    webhookUrls.set('env_cleared', { primary: null, secondary: url });
    const job: WebhookDelivery = { webhook_id: 'msg_cleared', environment_id: 'env_cleared', target: 'primary', url, kind: 'forward', body: '{"n":6}', created_at: new Date().toISOString() };
    await expect(handle(job, delivery(2))).resolves.toBeUndefined();
    expect(received).not.toContain('msg_cleared');
    const attempts = await deliveries.attemptsOf(environmentId('env_cleared'), 'msg_cleared:primary');
    expect(attempts.at(-1)).toMatchObject({ outcome: 'failed', status: null, error: 'webhook_url_removed' });
    sender.close();
  }, 30_000);
});

it('does not attempt again a delivery whose message is handed over again after it parked the delivery (its ack lost)', async () => {
  const deliveries = createDeliveryRepo(connection);
  const sender = loopbackSender();
  const seen: string[] = [];
  const failing = createServer((req, res) => {
    seen.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => res.writeHead(503).end());
  });
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  try {
    const failingUrl = `http://127.0.0.1:${(failing.address() as AddressInfo).port}/hooks`;
    webhookUrls.set('env_parked', { primary: failingUrl, secondary: null });
    const handle = handlerOver(deliveries, sender, 0);
    const job: WebhookDelivery = { webhook_id: 'msg_parked', environment_id: 'env_parked', target: 'primary', url: failingUrl, kind: 'forward', body: '{"n":7}', created_at: new Date().toISOString() };
    // Attempted, failed, parked for its retry: acked.
    await expect(handle(job, delivery(1))).resolves.toBeUndefined();
    await expect(handle(job, delivery(2))).resolves.toBeUndefined();
    expect(seen).toEqual(['msg_parked']);
    const attempts = await deliveries.attemptsOf(environmentId('env_parked'), 'msg_parked:primary');
    expect(attempts.map((attempt) => [attempt.attempt, attempt.outcome])).toEqual([[1, 'retrying']]);
  } finally {
    sender.close();
    await new Promise((resolve) => failing.close(resolve));
  }
}, 30_000);

it('does not send again a webhook the receiver refused for good while the database went away, once it is back', async () => {
  const ferret = await startFerretDb();
  const outage = await connectMongo({ uri: ferret.uri, dbName: uniqueDbName('deliver_refused'), logger, serverSelectionTimeoutMs: 1_000 });
  const sent: string[] = [];
  let restarting: Promise<void> | undefined;
  // The receiver refuses the webhook for good; the database dies before the attempt is recorded.
  const refusing = createServer((req, res) => {
    sent.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => {
      restarting ??= ferret.restart(3_000);
      setTimeout(() => res.writeHead(422).end(), 300);
    });
  });
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
  const sender = loopbackSender();
  try {
    const deliveries = createDeliveryRepo(outage);
    await deliveries.init();
    const handle = handlerOver(deliveries, sender);
    const refusingUrl = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/hooks`;
    webhookUrls.set('env_refusing', { primary: refusingUrl, secondary: null });
    const job: WebhookDelivery = { webhook_id: 'msg_refused_once', environment_id: 'env_refusing', target: 'primary', url: refusingUrl, kind: 'forward', body: '{"n":8}', created_at: new Date().toISOString() };
    // As JetStream does: a message whose handler throws is handed over again, a moment later.
    let handedOver = 0;
    for (let count = 1; count <= 12; count++) {
      handedOver = count;
      const settled = await handle(job, delivery(count)).then(
        () => true,
        () => false,
      );
      if (settled) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await restarting;
    expect(sent).toEqual(['msg_refused_once']);
    expect(handedOver).toBe(1);
    const attempts = await deliveries.attemptsOf(environmentId('env_refusing'), 'msg_refused_once:primary');
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status, attempt.outcome])).toEqual([[1, 422, 'failed']]);
  } finally {
    sender.close();
    await new Promise((resolve) => refusing.close(resolve));
    await outage.close();
    await ferret.dispose();
  }
}, 60_000);
