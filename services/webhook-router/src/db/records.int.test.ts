import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createDeliveryRepo } from './delivery-repo.js';
import { createInboundWebhookRepo } from './inbound-webhook-repo.js';
import { createWebhookClaimRepo } from './webhook-claim-repo.js';

let mongo: TestMongo;
let connection: Connection;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('router'), logger: createLogger({ service: 'test', level: 'error' }) });
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

const env = environmentId('env_1');
const inboundDoc = (id: string) => ({
  _id: id,
  integration: 'acme',
  provider: 'acme',
  status: 'forwarded' as const,
  reason: null,
  signature: 'valid' as const,
  connection_id: null,
  webhook_id: `msg_${id}`,
  received_at: new Date(),
  processed_at: new Date(),
});

describe('the router records', () => {
  it('store a burst of inbound webhooks together, and a redelivered one once', async () => {
    const inbound = createInboundWebhookRepo(connection);
    await inbound.init();
    await Promise.all(Array.from({ length: 50 }, (_, i) => inbound.record(env, inboundDoc(`iwh_${i}`))));
    // JetStream handed two of them over again, one of them in a batch with a new one.
    await Promise.all([inbound.record(env, inboundDoc('iwh_3')), inbound.record(env, inboundDoc('iwh_new')), inbound.record(env, inboundDoc('iwh_7'))]);
    expect(await connection.collection('inbound_webhooks').countDocuments({ environment_id: 'env_1' })).toBe(51);
    expect(await inbound.find(env, 'iwh_new')).toMatchObject({ status: 'forwarded', webhook_id: 'msg_iwh_new' });
    expect(await inbound.find(environmentId('env_2'), 'iwh_new')).toBeNull();
  });

  it('keep every attempt of a delivery, in order, and one copy of a repeated attempt', async () => {
    const deliveries = createDeliveryRepo(connection);
    await deliveries.init();
    const attempt = (n: number, outcome: 'retrying' | 'delivered', status: number | null) => ({
      delivery: 'msg_1:primary',
      webhook_id: 'msg_1',
      target: 'primary' as const,
      kind: 'forward' as const,
      url: 'http://127.0.0.1/hooks',
      attempt: n,
      status,
      error: status === null ? 'connection_refused' : null,
      duration_ms: 3,
      outcome,
      next_attempt_at: null,
      created_at: new Date(0),
      at: new Date(1000 * n),
    });
    await deliveries.recordAttempt(env, attempt(1, 'retrying', null));
    await deliveries.recordAttempt(env, attempt(2, 'retrying', 503));
    await deliveries.recordAttempt(env, attempt(2, 'retrying', 503));
    await deliveries.recordAttempt(env, attempt(3, 'delivered', 200));
    const stored = await deliveries.attemptsOf(env, 'msg_1:primary');
    expect(stored.map((doc) => [doc.attempt, doc.status, doc.outcome])).toEqual([
      [1, null, 'retrying'],
      [2, 503, 'retrying'],
      [3, 200, 'delivered'],
    ]);
  });

  it('hold a replay claim once per key: its own redelivery keeps it, a replay in the same batch or later does not, nor across environments', async () => {
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    await claims.init();
    const ask = (inboundId: string, key: string, environment = env) => ({ environment, integration: 'acme', key, inboundId });
    const t0 = new Date('2026-01-01T00:00:00Z');
    expect(await claims.claim([ask('iwh_a', 'sha256:1'), ask('iwh_b', 'sha256:1'), ask('iwh_c', 'id:x'), ask('iwh_d', 'sha256:1', environmentId('env_2'))], t0)).toEqual([true, false, true, true]);
    // JetStream hands iwh_a over again; a replay comes later.
    expect(await claims.claim([ask('iwh_a', 'sha256:1'), ask('iwh_e', 'sha256:1'), ask('iwh_f', 'id:y')], new Date(t0.getTime() + 1000))).toEqual([true, false, true]);
    // Past the window, before a sweep: the stale claim is taken over, once.
    const later = new Date(t0.getTime() + 61_000);
    expect(await claims.claim([ask('iwh_g', 'sha256:1'), ask('iwh_h', 'sha256:1')], later)).toEqual([true, false]);
    expect(await claims.sweep(new Date(t0.getTime() + 62_000))).toBe(3);
    expect(await connection.collection('inbound_webhook_claims').countDocuments({})).toBe(1);
  });
});
