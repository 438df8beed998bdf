/**
 * At most `limit` runs at once in this replica; the rest wait their turn in order. A run whose
 * `signal` aborts while it waits leaves the line at once, rejecting with the signal's reason.
 */
export function createLimiter(limit: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async function limited<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (active >= limit) {
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          signal?.removeEventListener('abort', leave);
          resolve();
        };
        const leave = () => {
          waiting.splice(waiting.indexOf(turn), 1);
          reject(signal?.reason);
        };
        if (signal?.aborted) return reject(signal.reason);
        signal?.addEventListener('abort', leave, { once: true });
        waiting.push(turn);
      });
    }
    active++;
    try {
      return await work();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}
