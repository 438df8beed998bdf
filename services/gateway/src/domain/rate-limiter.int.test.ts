import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createBus, openKv, type Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createRateLimiter } from './rate-limiter.js';

let nats: TestNats;
const buses: Bus[] = [];

async function replica(limit: number, bucket: string, now?: () => number) {
  // Test buckets are no service's: the test server's observer may open them. The services' 5 s
  // deadline: 2 s was a bet on a loaded machine for a bucket opened by three replicas at once,
  // and for 150 compare-and-sets racing on one key.
  const bus = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 5_000 });
  buses.push(bus);
  const store = await openKv<{ reserved: number }>(bus, { name: bucket, ttlMs: 300_000 });
  return createRateLimiter({ store, ...(now ? { now } : {}) }, { limit, windowMs: 60_000 });
}

beforeAll(async () => {
  nats = await startNats();
});

afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.drain()));
  await nats?.dispose();
});

describe('rate limiter on NATS KV', () => {
  it('admits exactly the limit across replicas, whatever the interleaving', async () => {
    // One window throughout, whatever the wall clock: on the real one, a minute turning mid-test
    // (likelier the slower a loaded machine runs it) would open a second budget.
    const now = () => 1_000;
    const [a, b, c] = await Promise.all([replica(50, 'rl_exact', now), replica(50, 'rl_exact', now), replica(50, 'rl_exact', now)]);
    const replicas = [a, b, c];
    const decisions = await Promise.all(Array.from({ length: 150 }, (_, i) => replicas[i % 3]!.take('acc_1')));
    expect(decisions.filter((decision) => decision.allowed)).toHaveLength(50);
    const refused = decisions.find((decision) => !decision.allowed);
    expect(refused?.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused?.retryAfter).toBeLessThanOrEqual(60);
  });

  it("forgets the accounts of windows that are over: one a connect session must not stay for the replica's life", async () => {
    let at = 1_000;
    const limiter = await replica(5, 'rl_forget', () => at);
    for (let i = 0; i < 200; i++) await limiter.take(`session_${i}`);
    expect(limiter.tracked()).toBe(200);
    at += 60_000;
    await limiter.take('session_still_here');
    expect(limiter.tracked()).toBe(1);
  });

  it('keeps accounts apart', async () => {
    // One window throughout, as above.
    const limiter = await replica(3, 'rl_accounts', () => 1_000);
    for (let i = 0; i < 3; i++) expect((await limiter.take('acc_a')).allowed).toBe(true);
    expect((await limiter.take('acc_a')).allowed).toBe(false);
    expect((await limiter.take('acc_b')).allowed).toBe(true);
  });

  it('opens a fresh budget in the next window', async () => {
    let now = 120_000;
    const limiter = await replica(2, 'rl_windows', () => now);
    await limiter.take('acc_1');
    await limiter.take('acc_1');
    expect((await limiter.take('acc_1')).allowed).toBe(false);
    now += 60_000;
    expect((await limiter.take('acc_1')).allowed).toBe(true);
  });
  it('spends a cost larger than one, refusing what the rest of the budget cannot cover and keeping that rest for smaller takes', async () => {
    const now = () => 1_000;
    const [a, b] = await Promise.all([replica(1_000, 'rl_costs', now), replica(1_000, 'rl_costs', now)]);
    expect((await a.take('acc_1', 600)).allowed).toBe(true);
    expect((await b.take('acc_1', 600)).allowed).toBe(false);
    expect((await b.take('acc_1', 300)).allowed).toBe(true);
    expect((await a.take('acc_1', 2_000)).allowed).toBe(false);
    // Never more than the limit across the replicas, whatever each still holds.
    let admitted = 900;
    for (let i = 0; i < 200; i++) if ((await [a, b][i % 2]!.take('acc_1', 1)).allowed) admitted++;
    expect(admitted).toBe(1_000);
  });
});
