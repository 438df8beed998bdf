import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
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
  locks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `write_keys_${randomBytes(4).toString('hex')}`, ttlMs: TTL_MS }));
}, 60_000);

afterAll(async () => {
  await bus?.close();
  await nats?.dispose();
});

const options = { waitMs: 10_000, busy: 'busy', renewEveryMs: TTL_MS / 4, ttlMs: TTL_MS };

describe('one write at a time', () => {
  it('keeps the key for work that outlasts the TTL: nobody else enters meanwhile', async () => {
    const order: string[] = [];
    const long = oneAtATime(
      locks,
      'write_long',
      async (holding) => {
        order.push('long begins');
        await new Promise((resolve) => setTimeout(resolve, TTL_MS * 2.5));
        // Renewed all along: still surely held, and the work may write.
        expect(holding.held()).toBe(true);
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

  it('refuses the renewal of a key that expired, so that its holder learns it lost it', async () => {
    const lock = await locks.acquire('write_expired');
    expect(lock).not.toBeNull();
    await eventually(async () => ((await locks.isHeld('write_expired')) ? undefined : true), 10_000, 'the key to expire', 50);
    expect(await locks.renew(lock!)).toBe(false);
  }, 30_000);

  it('keeps a holder stalled past the TTL from writing while another replica holds the key', async () => {
    let written = false;
    let other: Awaited<ReturnType<KvLocks['acquire']>> = null;
    const stalled = oneAtATime(
      locks,
      'write_stalled',
      async (holding) => {
        // A long GC pause or a blocked event loop: no renewal runs, and the bucket expires the key.
        const until = performance.now() + TTL_MS * 2;
        while (performance.now() < until);
        expect(holding.held()).toBe(false);
        // Another replica takes the key meanwhile, and may be writing the same document.
        other = await eventually(async () => (await locks.acquire('write_stalled')) ?? undefined, 10_000, 'another replica to take the key', 20);
        holding.assertHeld();
        written = true;
      },
      options,
    );
    await expect(stalled).rejects.toBeInstanceOf(AppError);
    await expect(stalled).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(written).toBe(false);
    // Its release left the other replica's key alone.
    expect(await locks.isHeld('write_stalled')).toBe(true);
    expect(await locks.release(other!)).toBe(true);
  }, 30_000);

  it('reports the work of a holder stalled past the TTL as failed, not done, though it wrote without looking', async () => {
    // A write sent before the stall cannot be taken back: its caller is told to try again.
    let other: Awaited<ReturnType<KvLocks['acquire']>> = null;
    const stalled = oneAtATime(
      locks,
      'write_stalled_blind',
      async () => {
        const until = performance.now() + TTL_MS * 2;
        while (performance.now() < until);
        other = await eventually(async () => (await locks.acquire('write_stalled_blind')) ?? undefined, 10_000, 'another replica to take the key', 20);
        return 'written';
      },
      options,
    );
    await expect(stalled).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(await locks.release(other!)).toBe(true);
  }, 30_000);
});
