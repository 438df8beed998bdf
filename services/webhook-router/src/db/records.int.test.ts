import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { explainUntilIndexed, startMongo, uniqueDbName, watchCommands, type TestMongo } from '@latchkey/testing';
import { deliveryQueries, createDeliveryRepo } from './delivery-repo.js';
import { createInboundWebhookRepo } from './inbound-webhook-repo.js';
import { parkedDeliveryId } from './parked-delivery-model.js';
import { createParkedDeliveryRepo } from './parked-delivery-repo.js';
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

  it('drop the inbound log and the attempts older than their retention, across environments, and nothing newer', async () => {
    const inbound = createInboundWebhookRepo(connection);
    const deliveries = createDeliveryRepo(connection);
    await Promise.all([inbound.init(), deliveries.init()]);
    const old = new Date(Date.now() - 30 * 24 * 3600_000);
    await inbound.record(env, { ...inboundDoc('iwh_old'), received_at: old, processed_at: old });
    await inbound.record(environmentId('env_2'), { ...inboundDoc('iwh_old_2'), received_at: old, processed_at: old });
    await inbound.record(env, inboundDoc('iwh_fresh'));
    const attempt = (delivery: string, at: Date) => ({
      delivery,
      webhook_id: delivery,
      target: 'primary' as const,
      kind: 'forward' as const,
      url: 'http://127.0.0.1/hooks',
      attempt: 1,
      status: 200,
      error: null,
      duration_ms: 3,
      outcome: 'delivered' as const,
      next_attempt_at: null,
      created_at: at,
      at,
    });
    await deliveries.recordAttempt(env, attempt('msg_old:primary', old));
    await deliveries.recordAttempt(env, attempt('msg_fresh:primary', new Date()));
    const kept = new Date(Date.now() - 14 * 24 * 3600_000);
    // With what the cases before left, some of it as old.
    expect(await inbound.prune(kept)).toBeGreaterThanOrEqual(2);
    expect(await deliveries.prune(kept)).toBeGreaterThanOrEqual(1);
    expect(await inbound.find(env, 'iwh_old')).toBeNull();
    expect(await inbound.find(environmentId('env_2'), 'iwh_old_2')).toBeNull();
    expect(await inbound.find(env, 'iwh_fresh')).not.toBeNull();
    expect(await deliveries.wasDelivered(env, 'msg_fresh:primary', 2)).toBe(true);
    expect(await deliveries.attemptsOf(env, 'msg_old:primary')).toEqual([]);
  });

  it('hold a replay claim once per key: its own redelivery keeps it, a replay in the same batch or later does not, nor across environments', async () => {
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    await claims.init();
    const ask = (inboundId: string, key: string, environment = env) => ({ environment, integration: 'acme', key, inboundId });
    const t0 = new Date('2026-01-01T00:00:00Z');
    expect(await claims.claim([ask('iwh_a', 'sha256:1'), ask('iwh_b', 'sha256:1'), ask('iwh_c', 'id:x'), ask('iwh_d', 'sha256:1', environmentId('env_2'))], t0)).toEqual([true, false, true, true]);
    // JetStream hands iwh_a over again; a replay comes later.
    expect(await claims.claim([ask('iwh_a', 'sha256:1'), ask('iwh_e', 'sha256:1'), ask('iwh_f', 'id:y')], new Date(t0.getTime() + 1000))).toEqual([true, false, true]);
    // Past the window: the stale claim (in the next window's collection) is taken over, once.
    const later = new Date(t0.getTime() + 61_000);
    expect(await claims.claim([ask('iwh_g', 'sha256:1'), ask('iwh_h', 'sha256:1')], later)).toEqual([true, false]);
  });

  it('refuse a replay across the turn of a window, until a window after the first came, and give a key to one webhook when a replica is a window ahead', async () => {
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    const ask = (inboundId: string, key: string) => ({ environment: env, integration: 'turns', key, inboundId });
    const turn = new Date('2026-02-01T00:01:00Z').getTime();
    // The last millisecond of a window, then replays in the next window and past the first's expiry.
    expect(await claims.claim([ask('iwh_1', 'id:t')], new Date(turn - 1))).toEqual([true]);
    expect(await claims.claim([ask('iwh_2', 'id:t')], new Date(turn))).toEqual([false]);
    expect(await claims.claim([ask('iwh_3', 'id:t')], new Date(turn + 59_998))).toEqual([false]);
    expect(await claims.claim([ask('iwh_4', 'id:t')], new Date(turn + 59_999))).toEqual([true]);
    // A replica whose clock is in the next window claims a key first; the webhook of this window
    // that meets it there gives it up (and JetStream's redelivery of the first still holds it).
    expect(await claims.claim([ask('iwh_ahead', 'id:u')], new Date(turn + 60_000))).toEqual([true]);
    expect(await claims.claim([ask('iwh_behind', 'id:u')], new Date(turn + 59_000))).toEqual([false]);
    expect(await claims.claim([ask('iwh_ahead', 'id:u')], new Date(turn + 61_000))).toEqual([true]);
  });

  it('drop whole the collections of windows two or more behind', async () => {
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    const ask = (inboundId: string, key: string) => ({ environment: env, integration: 'sweep', key, inboundId });
    const t0 = new Date('2026-03-01T00:00:00Z').getTime();
    const window = t0 / 60_000;
    expect(await claims.claim([ask('iwh_1', 'id:1')], new Date(t0))).toEqual([true]);
    expect(await claims.claim([ask('iwh_2', 'id:2')], new Date(t0 + 60_000))).toEqual([true]);
    expect(await claimCollections()).toEqual(expect.arrayContaining([window, window + 1, window + 2].map((at) => `inbound_webhook_claims_${at}`)));
    expect(await claims.sweep(new Date(t0 + 2 * 60_000))).toBeGreaterThanOrEqual(1);
    const left = await claimCollections();
    expect(left).not.toContain(`inbound_webhook_claims_${window}`);
    expect(left).toEqual(expect.arrayContaining([`inbound_webhook_claims_${window + 1}`, `inbound_webhook_claims_${window + 2}`]));
    // What a kept window holds still counts: id:2 is held; id:1's claim there has expired.
    expect(await claims.claim([ask('iwh_3', 'id:2'), ask('iwh_4', 'id:1')], new Date(t0 + 2 * 60_000 - 1))).toEqual([false, true]);
  });

  it('honour claims kept before windows until they expire, by `_id`, then drop their collection', async () => {
    const legacy = connection.collection('inbound_webhook_claims');
    const ask = (inboundId: string) => ({ environment: env, integration: 'upgrade', key: 'id:old', inboundId });
    const until = Date.now() + 3_000;
    const { _id } = claimQueries.byId(ask('iwh_old'));
    await legacy.insertOne({ _id: _id as never, environment_id: env, integration: 'upgrade', inbound_id: 'iwh_old', claimed_at: new Date(), expires_at: new Date(until) });
    const claims = createWebhookClaimRepo(connection, { windowMs: 60_000 });
    await claims.init();
    expect(await claims.claim([ask('iwh_replay')])).toEqual([false]);
    expect(await claims.claim([ask('iwh_old')])).toEqual([true]);
    await claims.sweep();
    expect(await claimCollections()).toContain('inbound_webhook_claims');
    // Once it expired, the next sweep drops it; a key it held goes to the next webhook.
    await claims.sweep(new Date(until));
    expect(await claimCollections()).not.toContain('inbound_webhook_claims');
    expect(await claims.claim([ask('iwh_next')], new Date(until + 60_000))).toEqual([true]);
  });
});

async function claimCollections(): Promise<string[]> {
  const collections = await connection.db!.listCollections({}, { nameOnly: true }).toArray();
  return collections.map(({ name }) => name).filter((name) => name.startsWith('inbound_webhook_claims'));
}

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
    const now = new Date();
    await claims.claim([request], now);
    const claimDocs = connection.collection<{ _id: string }>(`inbound_webhook_claims_${Math.floor(now.getTime() / 60_000)}`);
    const claim = await explainUntilIndexed(() => claimDocs.find(claimQueries.byId(request)));
    expect(claim.indexed ? 'indexed' : claim.summary).toBe('indexed');
    const deliveries = createDeliveryRepo(connection);
    await deliveries.init();
    const attemptDocs = connection.collection<{ _id: string }>('webhook_attempts');
    const delivered = await explainUntilIndexed(() => attemptDocs.find(deliveryQueries.delivered('msg_explained:primary')));
    expect(delivered.indexed ? 'indexed' : delivered.summary).toBe('indexed');
  }, 20_000);

  it('a redelivered batch meeting its claims, replays and a redelivered delivery send no other query', async () => {
    const { connection: watched, commands, ferretDb, close } = await watchCommands(mongo.uri, dbName);
    try {
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
      await close();
    }
  }, 30_000);

  it('a stale claim met by two replicas at once goes to one webhook, read and removed by `_id` alone', async () => {
    const { connection: watched, commands, ferretDb, close } = await watchCommands(mongo.uri, dbName);
    try {
      const [one, two] = [createWebhookClaimRepo(watched, { windowMs: 60_000 }), createWebhookClaimRepo(watched, { windowMs: 60_000 })];
      const ask = (inboundId: string, key = 'id:stale') => ({ environment: env, integration: 'takeover', key, inboundId });
      const t0 = new Date('2026-04-01T00:00:00Z').getTime();
      expect(await one.claim([ask('iwh_first')], new Date(t0))).toEqual([true]);
      commands.length = 0;

      // A window and a half later, the first claim's copy in the next window is stale.
      const later = new Date(t0 + 90_000);
      const [byOne, byTwo] = await Promise.all([one.claim([ask('iwh_x')], later), two.claim([ask('iwh_y')], later)]);
      expect([byOne[0], byTwo[0]].filter(Boolean)).toHaveLength(1);
      const winner = byOne[0] ? 'iwh_x' : 'iwh_y';
      expect(await two.claim([ask(winner), ask(winner === 'iwh_x' ? 'iwh_y' : 'iwh_x')], new Date(t0 + 91_000))).toEqual([true, false]);

      // A webhook whose first try marked a stale claim and then died takes it at its redelivery.
      await one.claim([ask('iwh_early', 'id:died')], new Date(t0));
      const window = watched.collection(`inbound_webhook_claims_${t0 / 60_000 + 1}`);
      const { _id } = claimQueries.byId(ask('iwh_early', 'id:died'));
      const stale = await window.findOne({ _id: _id as never });
      await window.insertOne({ ...stale!, _id: `${_id}#iwh_early#${t0}` as never, inbound_id: 'iwh_died' });
      expect(await two.claim([ask('iwh_other', 'id:died')], later)).toEqual([false]);
      expect(await one.claim([ask('iwh_died', 'id:died')], later)).toEqual([true]);

      // Its first try, still running, removes the stale claim after the redelivery read it, and a
      // new webhook claims the key then: the redelivery must not remove that webhook's claim.
      await one.claim([ask('iwh_slow', 'id:race')], new Date(t0));
      const raceWindow = watched.collection(`inbound_webhook_claims_${t0 / 60_000 + 1}`);
      const raceId = claimQueries.byId(ask('iwh_slow', 'id:race'))._id;
      await raceWindow.insertOne({ ...(await raceWindow.findOne({ _id: raceId as never }))!, _id: `${raceId}#iwh_slow#${t0}` as never, inbound_id: 'iwh_redelivered' });
      let reads = 0;
      const racing = interleaved(watched, raceId, async () => {
        // The redelivery's second read of the key (after its marker): the first try removes the
        // stale claim before it, and a new webhook claims the key after it.
        if (++reads !== 2) return undefined;
        await raceWindow.deleteOne({ _id: raceId as never });
        return async () => expect(await two.claim([ask('iwh_new', 'id:race')], later)).toEqual([true]);
      });
      expect(await createWebhookClaimRepo(racing, { windowMs: 60_000 }).claim([ask('iwh_redelivered', 'id:race')], later)).toEqual([false]);
      expect(reads).toBeGreaterThanOrEqual(2);
      expect((await raceWindow.findOne({ _id: raceId as never }))?.inbound_id).toBe('iwh_new');

      for (const { name, body } of commands.filter((command) => command.name === 'find' || command.name === 'delete')) {
        const filters = name === 'find' ? [body['filter']] : (body['deletes'] as Array<{ q: unknown }>).map((item) => item.q);
        for (const filter of filters as Array<Record<string, unknown>>) {
          expect(Object.keys(filter)).toEqual(['_id']);
          if (ferretDb) expect(typeof filter['_id']).toBe('string');
        }
      }
      expect(commands.map((command) => command.name).filter((name) => ['aggregate', 'count', 'getMore', 'distinct', 'update'].includes(name))).toEqual([]);
    } finally {
      await close();
    }
  }, 30_000);
});

/**
 * `connection`, with every read of claim `id` (one `{_id}` lookup, or a list of ids) going through
 * `around`: what it does runs before the read, and what it answers (if anything) runs after, so a
 * test can place other writers between two steps of a claim, on the real database.
 */
function interleaved(connection: Connection, id: string, around: () => Promise<(() => Promise<void>) | undefined>): Connection {
  const reads = (filter: unknown) => JSON.stringify(filter).includes(`"${id}"`);
  const bound = <T extends object>(target: T, overrides: Record<string, unknown>): T =>
    new Proxy(target, {
      get: (object, key) => {
        if (typeof key === 'string' && key in overrides) return overrides[key];
        const value = Reflect.get(object, key) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
      },
    });
  const database = connection.db!;
  const collection = (name: string) => {
    const real = database.collection(name);
    const step = async <R>(filter: unknown, read: () => Promise<R>): Promise<R> => {
      const after = reads(filter) ? await around() : undefined;
      const result = await read();
      await after?.();
      return result;
    };
    return bound(real, {
      findOne: (filter: never, ...rest: never[]) => step(filter, () => real.findOne(filter, ...rest)),
      find: (filter: never, ...rest: never[]) => bound(real.find(filter, ...rest), { toArray: () => step(filter, () => real.find(filter, ...rest).toArray()) }),
    });
  };
  return bound(connection, { db: bound(database, { collection }) });
}

describe('the parked deliveries gauge', () => {
  // Every replica added to one count document per slot with `$inc`; FerretDB applies an update by
  // reading and writing back the document, so replicas parking at once lost each other's counts.
  it('counts what two replicas park and return at once', async () => {
    const slotMs = 60_000;
    const [one, two] = [createParkedDeliveryRepo(connection, { slotMs }), createParkedDeliveryRepo(connection, { slotMs })];
    const dueAt = new Date(Date.now() + 5 * 60_000);
    const by = (Math.floor(dueAt.getTime() / slotMs) + 1) * slotMs;
    const request = (replica: string, i: number) => {
      const webhookId = `msg_gauge_${replica}_${i}`;
      return {
        id: parkedDeliveryId(`${webhookId}:primary`, 1),
        dueAt,
        job: { webhook_id: webhookId, environment_id: env, target: 'primary' as const, url: 'https://hooks.example.com/x', kind: 'forward' as const, body: '{}', created_at: new Date().toISOString(), attempts: 3, holds: 0, revision: 1 },
      };
    };
    // One parking at a time on each replica: each is its own write of the count.
    const parkEach = async (parked: typeof one, replica: string) => {
      for (let i = 0; i < 30; i++) await parked.park(env, request(replica, i));
    };
    await Promise.all([parkEach(one, 'one'), parkEach(two, 'two')]);
    expect(await one.countParked()).toBe(60);
    // Each returns ten of what the other parked, one at a time.
    const releaseEach = async (parked: typeof one, replica: string) => {
      for (let i = 0; i < 10; i++) await parked.release(by, [request(replica, i).id]);
    };
    await Promise.all([releaseEach(one, 'two'), releaseEach(two, 'one'), parkEach(createParkedDeliveryRepo(connection, { slotMs }), 'three')]);
    expect(await two.countParked()).toBe(70);
  });
});
