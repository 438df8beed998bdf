import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { oneAtATime, writesOneAtATime, type HeldLock, type Holding, type KvLocks } from './kv-locks.js';

// A holding lost while its work runs, with a bucket played by a fake: the renewals' answers are
// the test's to choose. A short TTL and renewal, so that a test lasts a second or two, with room
// left for timers late on a loaded machine.
const TTL_MS = 1_000;
const RENEW_EVERY_MS = 200;
const options = { waitMs: 1_000, busy: 'busy', renewEveryMs: RENEW_EVERY_MS, ttlMs: TTL_MS };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Locks that grant every acquire, answer renewals with `renew`, and log each call in turn. */
function fakeLocks(renew: (count: number) => Promise<boolean>, acquireMs = 0) {
  const calls: string[] = [];
  let renewals = 0;
  const locks: Pick<KvLocks, 'acquire' | 'renew' | 'release'> = {
    async acquire(key) {
      calls.push('acquire');
      if (acquireMs > 0) await sleep(acquireMs);
      return { key, owner: 'me', revision: 1 } satisfies HeldLock;
    },
    async renew() {
      calls.push('renew');
      renewals += 1;
      return renew(renewals);
    },
    async release() {
      calls.push('release');
      return true;
    },
  };
  return { locks, calls };
}

/** What `oneAtATime` ended with: its result, or the error it threw. */
async function outcome<T>(run: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  try {
    return { value: await run };
  } catch (error) {
    return { error };
  }
}

function expectRetryable(result: { error: unknown } | { value: unknown }) {
  expect('error' in result).toBe(true);
  const error = (result as { error: unknown }).error;
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe('service_unavailable');
  expect((error as AppError).retryable).toBe(true);
}

describe('a write key lost while its work runs', () => {
  it('is seen by the work once a renewal is refused, and its write is not made', async () => {
    // The key expired under a stalled holder, or another replica holds it now: renew says false.
    const { locks } = fakeLocks(async () => false);
    let written = false;
    const result = await outcome(
      oneAtATime(
        locks,
        'write_doc',
        async (holding: Holding) => {
          expect(holding.held()).toBe(true);
          await sleep(RENEW_EVERY_MS * 2);
          expect(holding.held()).toBe(false);
          holding.assertHeld();
          written = true;
        },
        options,
      ),
    );
    expect(written).toBe(false);
    expectRetryable(result);
  });

  it('fails the work that wrote without looking, once done, rather than report it made', async () => {
    const { locks } = fakeLocks(async () => false);
    const result = await outcome(oneAtATime(locks, 'write_doc', () => sleep(RENEW_EVERY_MS * 2).then(() => 'done'), options));
    expectRetryable(result);
  });

  it('is trusted while renewals fail for now, but no longer than the TTL since the last one that succeeded', async () => {
    // The bucket electing a leader: renewals are not answered (rejected), so the key's fate is
    // unknown; it is surely this holder's only while it cannot have expired yet.
    const { locks } = fakeLocks(async () => {
      throw new AppError('service_unavailable', 'kv away');
    });
    const seen: boolean[] = [];
    const result = await outcome(
      oneAtATime(
        locks,
        'write_doc',
        async (holding: Holding) => {
          await sleep(RENEW_EVERY_MS * 2);
          seen.push(holding.held());
          await sleep(TTL_MS);
          seen.push(holding.held());
        },
        options,
      ),
    );
    expect(seen).toEqual([true, false]);
    expectRetryable(result);
  });

  it('keeps its holding through one renewal that fails for now when the next succeeds', async () => {
    const { locks } = fakeLocks(async (count) => {
      if (count === 1) throw new AppError('service_unavailable', 'kv away');
      return true;
    });
    const result = await outcome(
      oneAtATime(
        locks,
        'write_doc',
        async (holding: Holding) => {
          await sleep(TTL_MS * 1.5);
          holding.assertHeld();
          return 'written';
        },
        options,
      ),
    );
    expect(result).toEqual({ value: 'written' });
  });

  it('is not trusted past the TTL when the holder stalled and no renewal could run', async () => {
    // A long GC pause or a blocked event loop: no renewal ran (nor was refused), yet the key has
    // expired in the bucket, and another replica may hold it.
    const { locks, calls } = fakeLocks(async () => true);
    let written = false;
    const result = await outcome(
      oneAtATime(
        locks,
        'write_doc',
        async (holding: Holding) => {
          const stalledUntil = performance.now() + TTL_MS * 1.2;
          while (performance.now() < stalledUntil);
          holding.assertHeld();
          written = true;
        },
        options,
      ),
    );
    expect(calls).not.toContain('renew');
    expect(written).toBe(false);
    expectRetryable(result);
  });

  it('renews nothing once the work is done: no renewal follows the release', async () => {
    // Slow renewals, so that one is due while another is still in flight when the work ends.
    const { locks, calls } = fakeLocks(() => sleep(RENEW_EVERY_MS * 1.5).then(() => true));
    await oneAtATime(locks, 'write_doc', () => sleep(RENEW_EVERY_MS * 4), options);
    await sleep(RENEW_EVERY_MS * 4);
    expect(calls.filter((call) => call === 'release')).toHaveLength(1);
    expect(calls.at(-1)).toBe('release');
  });
});

describe('writes one at a time', () => {
  it('does not send a write whose key was acquired too late to be trusted', async () => {
    // The acquire's answer came after the key could have expired (the holder stalled meanwhile).
    const { locks } = fakeLocks(async () => true, 6_000 * 1.1);
    const alone = writesOneAtATime(locks, 'doc', 'busy');
    let written = false;
    const result = await outcome(
      alone('a', async () => {
        written = true;
      }),
    );
    expect(written).toBe(false);
    expectRetryable(result);
  }, 15_000);

  it('hands its write the holding, to look at again between its steps', async () => {
    const { locks } = fakeLocks(async () => true);
    const alone = writesOneAtATime(locks, 'doc', 'busy');
    expect(await alone('a', async (holding) => holding.held())).toBe(true);
  });
});
