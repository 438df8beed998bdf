import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { eventually, startNats, type TestNats } from '@latchkey/testing';
import { createBus, type Bus } from './create-bus.js';
import { createKvLocks, oneAtATime, type KvLocks } from './kv-locks.js';
import { openKv } from './kv.js';

// Write keys (`oneAtATime`) in a real KV bucket whose entries expire after TTL_MS.
const TTL_MS = 2_000;
let nats: TestNats;
let bus: Bus;
let locks: KvLocks;

beforeAll(async () => {
  nats = await startNats();
  // The services' 5 s deadline: the bucket's answers are not what is checked (2 s is a bet on a loaded machine).
  bus = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger: createLogger({ service: 'test', level: 'error' }), requestTimeoutMs: 5_000 });
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: 'write_keys_test', ttlMs: TTL_MS }));
}, 60_000);

afterAll(async () => {
  await bus?.close();
  await nats?.dispose();
});

const options = { waitMs: 10_000, busy: 'busy', renewEveryMs: TTL_MS / 4 };

describe('one write at a time', () => {
  it('keeps the key for work that outlasts the TTL: nobody else enters meanwhile', async () => {
    const order: string[] = [];
    const long = oneAtATime(
      locks,
      'write_long',
      async () => {
        order.push('long begins');
        await new Promise((resolve) => setTimeout(resolve, TTL_MS * 2.5));
        order.push('long ends');
      },
      options,
    );
    // The long work holds the key before the next one asks (200 ms of sleep was a bet on a loaded machine).
    await eventually(() => (order.includes('long begins') ? true : undefined), 10_000, 'the long work to hold the key', 20);
    const next = oneAtATime(locks, 'write_long', async () => void order.push('next'), options);
    await Promise.all([long, next]);
    expect(order).toEqual(['long begins', 'long ends', 'next']);
  }, 30_000);

  it('hands the key on within about one TTL when its holder died without releasing it', async () => {
    // A holder SIGKILLed mid-write: its key is there, and nobody will release or renew it.
    expect(await locks.acquire('write_orphan')).not.toBeNull();
    const started = Date.now();
    await oneAtATime(locks, 'write_orphan', async () => undefined, options);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThan(TTL_MS / 2);
    // The bucket's TTL, plus the server's expiry sweep and the waiter's polling.
    expect(waited).toBeLessThan(TTL_MS * 3);
  }, 30_000);

  it('releases the key once the work is done, renewals included, so the next writer enters at once', async () => {
    await oneAtATime(locks, 'write_renewed', () => new Promise((resolve) => setTimeout(resolve, TTL_MS)), options);
    // Told by the key itself, not by a clock: on a loaded machine (CI runs the chaos test beside
    // this one) the next writer's first acquire can take longer than the TTL's half, released or not.
    expect(await locks.isHeld('write_renewed')).toBe(false);
    let acquires = 0;
    const counted = { ...locks, acquire: (key: string) => ((acquires += 1), locks.acquire(key)) };
    await oneAtATime(counted, 'write_renewed', async () => undefined, options);
    expect(acquires).toBe(1);
  }, 30_000);
});
