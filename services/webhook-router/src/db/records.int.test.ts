import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import mongoose, { type Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { deliveryQueries, createDeliveryRepo } from './delivery-repo.js';
import { createInboundWebhookRepo } from './inbound-webhook-repo.js';
import { claimQueries, createWebhookClaimRepo } from './webhook-claim-repo.js';

let mongo: TestMongo;
let dbName: string;
let connection: Connection;

beforeAll(async () => {
  mongo = await startMongo();
  dbName = uniqueDbName('router');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger: createLogger({ service: 'test', level: 'error' }) });
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

/**
 * The drain's reads, on the test database (MongoDB, or FerretDB on SQLite or PostgreSQL): a
 * batch whose claims meet claims stored already (a redelivered batch, replays) and a redelivered
 * delivery read by `_id` only, so draining costs the same however many claims and attempts are
 * stored. FerretDB 1.24 reads the whole collection for any other filter, `_id: {$in: …}`
 * included; a regression to one fails here without timing anything.
 */
describe("the drain's reads are `_id` lookups", () => {
  it('a claim and a delivered delivery, by `_id`, are index lookups', async () => {
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    await claims.init();
    const request = { environment: env, integration: 'acme', key: 'sha256:explained', inboundId: 'iwh_explained' };
    await claims.claim([request]);
    const claimDocs = connection.collection<{ _id: string }>('inbound_webhook_claims');
    const claim = await explainUntilIndexed(() => claimDocs.find(claimQueries.byId(request)));
    expect(claim.indexed ? 'indexed' : claim.summary).toBe('indexed');
    const deliveries = createDeliveryRepo(connection);
    await deliveries.init();
    const attemptDocs = connection.collection<{ _id: string }>('webhook_attempts');
    const delivered = await explainUntilIndexed(() => attemptDocs.find(deliveryQueries.delivered('msg_explained:primary')));
    expect(delivered.indexed ? 'indexed' : delivered.summary).toBe('indexed');
  }, 20_000);

  it('a redelivered batch meeting its claims, replays and a redelivered delivery send no other query', async () => {
    // A second connection that reports every command it sends, to the same database.
    const watched = mongoose.createConnection(mongo.uri, { dbName, monitorCommands: true });
    await watched.asPromise();
    const commands: Array<{ name: string; body: Record<string, unknown> }> = [];
    watched.getClient().on('commandStarted', (event) => commands.push({ name: event.commandName, body: event.command as Record<string, unknown> }));
    try {
      const ferretDb = 'ferretdbVersion' in (await watched.db!.admin().command({ buildInfo: 1 }));
      const claims = createWebhookClaimRepo(watched, { windowMs: 60_000 });
      const deliveries = createDeliveryRepo(watched);
      const ask = (i: number, inboundId = `iwh_w${i}`) => ({ environment: env, integration: 'watched', key: `id:${i}`, inboundId });
      const t0 = new Date();
      const first = Array.from({ length: 300 }, (_, i) => ask(i));
      expect((await claims.claim(first, t0)).every(Boolean)).toBe(true);
      const attempt = {
        delivery: 'msg_w:primary',
        webhook_id: 'msg_w',
        target: 'primary' as const,
        kind: 'forward' as const,
        url: 'http://127.0.0.1/hooks',
        attempt: 1,
        status: 200,
        error: null,
        duration_ms: 3,
        outcome: 'delivered' as const,
        next_attempt_at: null,
        created_at: t0,
        at: t0,
      };
      await deliveries.recordAttempt(env, attempt);
      commands.length = 0;

      // JetStream hands a batch over again (its first handling outlived the ack wait), with two
      // replays of webhooks it holds and a new webhook.
      const again = [...first.slice(0, 100), ask(5, 'iwh_replay_a'), ask(6, 'iwh_replay_b'), ask(1000)];
      const held = await claims.claim(again, new Date(t0.getTime() + 1000));
      expect(held).toEqual([...again.slice(0, 100).map(() => true), false, false, true]);
      // A delivery handed over again: delivered already (its attempt 1), not one never delivered.
      expect(await deliveries.wasDelivered(env, 'msg_w:primary', 2)).toBe(true);
      expect(await deliveries.wasDelivered(environmentId('env_2'), 'msg_w:primary', 2)).toBe(false);
      expect(await deliveries.wasDelivered(env, 'msg_never:primary', 3)).toBe(false);

      const finds = commands.filter((command) => command.name === 'find');
      expect(finds.length).toBeGreaterThan(0);
      for (const { body } of finds) {
        const filter = body['filter'] as Record<string, unknown>;
        expect(Object.keys(filter)).toEqual(['_id']);
        // MongoDB answers a list of ids with one `$in` on `_id` (an index lookup there).
        if (ferretDb || typeof filter['_id'] !== 'object') expect(typeof filter['_id']).toBe('string');
        else expect(Object.keys(filter['_id'] as object)).toEqual(['$in']);
      }
      // Nothing that reads many documents.
      expect(commands.map((command) => command.name).filter((name) => ['aggregate', 'count', 'delete', 'getMore', 'distinct'].includes(name))).toEqual([]);
    } finally {
      await watched.close();
    }
  }, 30_000);
});
