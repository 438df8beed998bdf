import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { repeatEvery } from './repeat.js';

/** A run the test ends by hand. */
function pending() {
  let end!: () => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    end = resolve;
    fail = reject;
  });
  return { promise, end, fail };
}

describe('repeatEvery', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('runs the task at each tick, and skips the ticks that come while a run is still going', async () => {
    const runs: ReturnType<typeof pending>[] = [];
    const repeating = repeatEvery(1000, () => {
      const run = pending();
      runs.push(run);
      return run.promise;
    }, () => undefined);

    await jest.advanceTimersByTimeAsync(999);
    expect(runs).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toHaveLength(1);
    // Three ticks pass while the first run is slow: none starts a second run beside it.
    await jest.advanceTimersByTimeAsync(3000);
    expect(runs).toHaveLength(1);
    runs[0]!.end();
    await jest.advanceTimersByTimeAsync(1000);
    expect(runs).toHaveLength(2);
    runs[1]!.end();
    await repeating.stop();
  });

  it('hands a failed run to onError and runs again at the next tick', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const repeating = repeatEvery(
      100,
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('the database is away');
      },
      (error) => errors.push(error),
    );
    await jest.advanceTimersByTimeAsync(100);
    expect(errors).toEqual([new Error('the database is away')]);
    await jest.advanceTimersByTimeAsync(100);
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
    await repeating.stop();
  });

  it('hands a task that throws before returning its promise to onError too', async () => {
    const errors: unknown[] = [];
    const repeating = repeatEvery(
      100,
      () => {
        throw new Error('thrown at once');
      },
      (error) => errors.push(error),
    );
    await jest.advanceTimersByTimeAsync(200);
    expect(errors).toEqual([new Error('thrown at once'), new Error('thrown at once')]);
    await repeating.stop();
  });

  it('stop waits for the run in progress, and no run starts after it', async () => {
    const run = pending();
    let calls = 0;
    const repeating = repeatEvery(100, () => {
      calls += 1;
      return run.promise;
    }, () => undefined);
    await jest.advanceTimersByTimeAsync(100);
    let stopped = false;
    const stopping = repeating.stop().then(() => {
      stopped = true;
    });
    await jest.advanceTimersByTimeAsync(500);
    expect(stopped).toBe(false);
    run.end();
    await stopping;
    expect(stopped).toBe(true);
    await jest.advanceTimersByTimeAsync(500);
    expect(calls).toBe(1);
  });
});
