import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineEvent, STREAMS } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, ensureStreams, type Bus } from './index.js';

const lifecycle = defineEvent('test.lifecycle', z.object({ n: z.number() }));
const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let bus: Bus;
/** Creates the streams and counts what they hold, with the services' 5 s deadline. */
let admin: Bus;

beforeAll(async () => {
  nats = await startNats();
  // The publishing bus fails an attempt after 500 ms, so that without a window it fails at once;
  // creating the streams and counting them is not what is checked (500 ms is a bet on a loaded machine).
  bus = await createBus({ servers: nats.url, service: 'test', identity: nats.credentials('observer'), logger, requestTimeoutMs: 500 });
  admin = await createBus({ servers: nats.url, service: 'admin', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000 });
  await ensureStreams(admin);
}, 60_000);

afterAll(async () => {
  await bus?.close();
  await admin?.close();
  await nats?.dispose();
});

it('stores a fact published while NATS is away once it is back, within the retry window, and once', async () => {
  const jsm = await admin.jetstreamManager();
  const before = (await jsm.streams.info(STREAMS.events.name)).state.messages;
  await nats.stop();
  const published = bus.publish(lifecycle, { n: 1 }, { retryForMs: 20_000 });
  // Without the window it fails at once, as before.
  await expect(bus.publish(lifecycle, { n: 2 })).rejects.toMatchObject({ code: 'service_unavailable' });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await nats.start();
  await published;
  const after = await (await admin.jetstreamManager()).streams.info(STREAMS.events.name);
  expect(after.state.messages - before).toBe(1);
}, 60_000);
