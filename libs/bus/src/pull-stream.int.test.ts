import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, pullStream, servePullStream, type Bus } from './index.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let bus: Bus;

beforeAll(async () => {
  nats = await startNats();
  bus = await createBus({ servers: nats.url, service: 'test', identity: nats.credentials('observer'), logger, requestTimeoutMs: 1_000 });
}, 60_000);

afterAll(async () => {
  await bus?.drain();
  await nats?.dispose();
});

it('hands a slow stream over piece by piece as it comes, so its reader neither waits for a full chunk nor times out', async () => {
  // Server-sent events: a few bytes every second, longer in all than the reader's 4 s timeout
  // (whose 3 s to spare between pieces cover a loaded machine; 1 s against 400 ms did not).
  const source = (async function* () {
    for (let n = 1; n <= 5; n++) {
      yield new TextEncoder().encode(`data: ${n}\n\n`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  })();
  const { inbox, done } = servePullStream(bus, source, { idleTimeoutMs: 5_000 });
  const arrivals: string[] = [];
  for await (const chunk of pullStream(bus, inbox, 4_000)) arrivals.push(Buffer.from(chunk).toString());
  await done;
  expect(arrivals.join('')).toBe([1, 2, 3, 4, 5].map((n) => `data: ${n}\n\n`).join(''));
  // Event by event, not gathered into one chunk.
  expect(arrivals.length).toBeGreaterThan(1);
});

it('still hands a fast stream over in full chunks', async () => {
  const source = (async function* () {
    for (let n = 0; n < 64; n++) yield new Uint8Array(16 * 1024).fill(n);
  })();
  const { inbox, done } = servePullStream(bus, source, { idleTimeoutMs: 5_000 });
  const sizes: number[] = [];
  // The pull's deadline is not what is checked here: 1 s ran out on a loaded machine.
  for await (const chunk of pullStream(bus, inbox, 5_000)) sizes.push(chunk.length);
  await done;
  expect(sizes.reduce((sum, size) => sum + size, 0)).toBe(64 * 16 * 1024);
  expect(sizes.length).toBeLessThanOrEqual(5);
});

it('asks only a pull stream for chunks: a peer that names another subject cannot make its reader publish there', async () => {
  const published: string[] = [];
  const watched = bus.subscribeRaw('test.forged.>', ({ subject }) => void published.push(subject));
  try {
    await bus.flush();
    // Read, and given up before the first read (which tells the producer to let go).
    await expect(pullStream(bus, 'test.forged.read', 1_000).next()).rejects.toMatchObject({ code: 'internal_error' });
    await pullStream(bus, 'test.forged.dropped', 1_000).return(undefined);
    await bus.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(published).toEqual([]);
  } finally {
    watched.unsubscribe();
  }
});
