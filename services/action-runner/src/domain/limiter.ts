import { AppError } from '@latchkey/errors';

/**
 * At most `limit` runs at once in this replica; the rest wait their turn in order. A run whose
 * `signal` aborts while it waits leaves the line at once, rejecting with the signal's reason; one
 * still waiting after `maxWaitMs` leaves it with 503 `service_unavailable` (its caller would
 * give up before it ended), and its work never runs.
 */
export function createLimiter(limit: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async function limited<T>(work: () => Promise<T>, signal?: AbortSignal, maxWaitMs?: number): Promise<T> {
    // A waiter is handed its slot by the run that frees it (counted in `active` all along).
    if (active >= limit) {
      await new Promise<void>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const turn = () => {
          signal?.removeEventListener('abort', onAbort);
          clearTimeout(timer);
          resolve();
        };
        const leave = (reason: unknown) => {
          waiting.splice(waiting.indexOf(turn), 1);
          signal?.removeEventListener('abort', onAbort);
          clearTimeout(timer);
          reject(reason);
        };
        const onAbort = () => leave(signal?.reason);
        if (signal?.aborted) return reject(signal.reason);
        signal?.addEventListener('abort', onAbort, { once: true });
        if (maxWaitMs !== undefined) {
          timer = setTimeout(() => leave(new AppError('service_unavailable', 'Every run slot of this action-runner stayed busy; try again')), maxWaitMs);
        }
        waiting.push(turn);
      });
    } else {
      active++;
    }
    try {
      return await work();
    } finally {
      // The slot passes straight to the first in line, still counted: it wakes a microtask later,
      // and a call made in between would otherwise find the slot free and run beside it.
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  };
}
