import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { STREAMS, webhookContracts, type ServiceName, type WebhookDelivery } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { eventually, startMongo, startNats, uniqueDbName, watchCommands, type TestMongo, type TestNats } from '@latchkey/testing';
import { createDeliveryRepo } from '../db/delivery-repo.js';
import { MARK_WINDOW_MS, PARKED_COUNTS, markWindowOf, parkedDeliveryId, parkedDueBy } from '../db/parked-delivery-model.js';
import { createParkedDeliveryRepo } from '../db/parked-delivery-repo.js';
import { startReturningParked } from './return-parked-deliveries.js';

const logger = createLogger({ service: 'test', silent: true });
const SLOT_MS = 100;
let nats: TestNats;
let mongo: TestMongo;
let dbName: string;
let connection: Connection;
let router: Bus;
let observer: Bus;

const login = (service: ServiceName | 'observer') => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  dbName = uniqueDbName('parked');
  connection = await connectMongo({ uri: mongo.uri, dbName, logger });
  router = await login('webhook-router');
  await ensureStreams(router);
  observer = await login('observer');
}, 60_000);

afterAll(async () => {
  await connection?.dropDatabase().catch(() => undefined);
  await connection?.close();
  await Promise.all([router?.drain(), observer?.drain()]);
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

const env = environmentId('env_parked');
const job = (webhookId: string, revision: number): WebhookDelivery => ({
  webhook_id: webhookId,
  environment_id: env,
  target: 'primary',
  url: 'https://hooks.example.com/latchkey',
  kind: 'forward',
  body: JSON.stringify({ webhookId }),
  created_at: new Date().toISOString(),
  attempts: 3,
  holds: 0,
  revision,
});

/** The deliveries JOBS stores, in order, with when each was stored. */
async function storedDeliveries(): Promise<Array<{ job: WebhookDelivery; at: number }>> {
  const jsm = await observer.jetstreamManager();
  const { state } = await jsm.streams.info(STREAMS.jobs.name);
  const stored: Array<{ job: WebhookDelivery; at: number }> = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const message = await jsm.streams.getMessage(STREAMS.jobs.name, { seq });
    if (message?.subject === webhookContracts.deliver.subject) stored.push({ job: message.json<WebhookDelivery>(), at: message.time.getTime() });
  }
  return stored;
}

/** Every parked delivery still kept, by id. */
async function keptIds(): Promise<string[]> {
  const collections = await connection.db!.listCollections({}, { nameOnly: true }).toArray();
  const ids: string[] = [];
  for (const { name } of collections) {
    if (parkedDueBy(name) === undefined) continue;
    ids.push(...(await connection.db!.collection<{ _id: string }>(name).find({}).toArray()).map((doc) => doc._id));
  }
  return ids.sort();
}

describe('parked deliveries', () => {
  it('come back on JOBS once due, each once, though two replicas return them and one was parked twice; one not due stays', async () => {
    const { connection: watched, commands, ferretDb, close } = await watchCommands(mongo.uri, dbName);
    const [one, two] = [createParkedDeliveryRepo(watched, { slotMs: SLOT_MS }), createParkedDeliveryRepo(watched, { slotMs: SLOT_MS })];
    const returners = [one, two].map((parked) => startReturningParked({ logger, parked, deliveries: createDeliveryRepo(connection), bus: router, pollMs: 20 }));
    try {
      const dueAt = new Date(Date.now() + 300);
      // More than a read's batch, due in one slot.
      const soon = ['msg_a', 'msg_b', 'msg_c', ...Array.from({ length: 150 }, (_, i) => `msg_${i}`)].map((id) => ({ id: parkedDeliveryId(`${id}:primary`, 1), dueAt, job: job(id, 1) }));
      const later = { id: parkedDeliveryId('msg_later:primary', 2), dueAt: new Date(Date.now() + 60_000), job: job('msg_later', 2) };
      await Promise.all([...soon, later].map((request) => one.park(env, request)));
      // The same wait parked again, by another replica: in the same slot, and in a later one
      // (two copies of the message that parked it, handled at once).
      await two.park(env, soon[0]!);
      await two.park(env, { ...soon[0]!, dueAt: new Date(Date.now() + 1_000) });
      expect(await one.wasParked(soon[0]!.id)).toBe(true);
      expect(await one.wasParked(parkedDeliveryId('msg_a:primary', 2))).toBe(false);

      await eventually(async () => ((await keptIds()).length === 1 ? true : undefined), 10_000, 'the due deliveries to be returned', 50);
      expect(await keptIds()).toEqual([later.id]);
      const stored = await storedDeliveries();
      expect(stored.map((message) => message.job.webhook_id).sort()).toEqual(soon.map((request) => request.job.webhook_id).sort());
      expect(stored.map((message) => message.job)).toEqual(expect.arrayContaining(soon.map((request) => request.job)));
      // None came back before it was due.
      for (const message of stored) expect(message.at).toBeGreaterThanOrEqual(dueAt.getTime());

      // The metrics' count: the one kept, though one wait was parked twice in its slot.
      expect(await one.countParked()).toBe(1);

      // Reads by `_id`, or of a whole collection of due deliveries (or of the counts, one per
      // collection): no filter FerretDB would read every waiting delivery for. The tallies are
      // written by `_id` only.
      for (const { name, body } of commands.filter((command) => ['find', 'delete', 'update'].includes(command.name))) {
        const filters = name === 'find' ? [body['filter']] : (body[name === 'delete' ? 'deletes' : 'updates'] as Array<{ q: unknown }>).map((item) => item.q);
        const counts = body[name] === PARKED_COUNTS;
        if (name === 'update') expect(counts).toBe(true);
        for (const filter of filters as Array<Record<string, unknown>>) {
          if (Object.keys(filter).length === 0) {
            expect(counts || parkedDueBy(String(body[name])) !== undefined).toBe(true);
            continue;
          }
          expect(Object.keys(filter)).toEqual(['_id']);
          // A replica's tally is `<by>:<replica>`; an earlier version's count, deleted with its collection, is `by`.
          if (ferretDb) expect(counts ? ['number', 'string'] : ['string']).toContain(typeof filter['_id']);
        }
      }
      expect(commands.map((command) => command.name).filter((name) => ['aggregate', 'count', 'distinct'].includes(name))).toEqual([]);
    } finally {
      await Promise.all(returners.map((returner) => returner.stop()));
      await close();
    }
  }, 30_000);

  it('keep the marks of their waits for a window after the next, then drop them whole', async () => {
    const parked = createParkedDeliveryRepo(connection, { slotMs: SLOT_MS });
    const id = parkedDeliveryId('msg_marked:primary', 1);
    await parked.park(env, { id, dueAt: new Date(Date.now() + 60_000), job: job('msg_marked', 1) });
    const inAWindow = new Date(Date.now() + MARK_WINDOW_MS);
    expect(await parked.wasParked(id, inAWindow)).toBe(true);
    expect(await parked.sweepMarks(inAWindow)).toBe(0);
    expect(await parked.sweepMarks(new Date(Date.now() + 2 * MARK_WINDOW_MS))).toBeGreaterThanOrEqual(1);
    const left = await connection.db!.listCollections({}, { nameOnly: true }).toArray();
    expect(left.filter(({ name }) => markWindowOf(name) !== undefined)).toEqual([]);
  });

  it('drops a collection of due deliveries once it is empty and a while past its time', async () => {
    const parked = createParkedDeliveryRepo(connection, { slotMs: SLOT_MS });
    const returner = startReturningParked({ logger, parked, deliveries: createDeliveryRepo(connection), bus: router, pollMs: 20 });
    try {
      await parked.park(env, { id: parkedDeliveryId('msg_dropped:primary', 1), dueAt: new Date(Date.now() + 50), job: job('msg_dropped', 1) });
      const named = async () => (await connection.db!.listCollections({}, { nameOnly: true }).toArray()).filter(({ name }) => parkedDueBy(name) !== undefined && parkedDueBy(name)! < Date.now() + 10_000);
      await eventually(async () => ((await named()).length === 0 ? true : undefined), 10_000, 'the collection to be dropped', 50);
      expect((await storedDeliveries()).map((message) => message.job.webhook_id)).toContain('msg_dropped');
      // Its count went with it.
      const tallies = await connection.db!.collection<{ _id: number }>(PARKED_COUNTS).find({}).toArray();
      expect(tallies.filter(({ _id }) => _id < Date.now() + 10_000)).toEqual([]);
    } finally {
      await returner.stop();
    }
  }, 30_000);
});
