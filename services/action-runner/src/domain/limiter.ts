import { AppError } from '@latchkey/errors';

/** How a run waits for its slot. */
export interface LimitedOptions {
  /** Whose run it is (the environment): a freed slot goes to each waiting owner in turn. */
  owner: string;
  /** Aborting it while the run waits takes the run out of the line, rejecting with its reason. */
  signal?: AbortSignal;
  /** The longest wait, past which the run leaves the line with 503 and never starts. */
  maxWaitMs?: number;
}

export type Limited = <T>(work: () => Promise<T>, options: LimitedOptions) => Promise<T>;

/**
 * At most `limit` runs at once in this replica. The rest wait in one line per owner, and a
 * freed slot goes to the owners in turn (round robin), each owner's runs in their order: an
 * environment with a thousand runs queued delays another's next run by one run, not by a
 * thousand. A run whose `signal` aborts while it waits leaves the line at once, rejecting with
 * the signal's reason; one still waiting after `maxWaitMs` leaves it with 503
 * `service_unavailable` (its caller would give up before it ended), and its work never runs.
 */
export function createLimiter(limit: number): Limited {
  let active = 0;
  // The owners with runs waiting, in the order their turn comes (a Map keeps insertion order).
  const lines = new Map<string, Array<() => void>>();

  /** The next owner's first waiter, the owner moved to the back if it has more. */
  const nextInLine = (): (() => void) | undefined => {
    for (const [owner, line] of lines) {
      const turn = line.shift();
      lines.delete(owner);
      if (line.length > 0) lines.set(owner, line);
      return turn;
    }
    return undefined;
  };

  return async function limited<T>(work: () => Promise<T>, { owner, signal, maxWaitMs }: LimitedOptions): Promise<T> {
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
          const line = lines.get(owner);
          if (line) {
            line.splice(line.indexOf(turn), 1);
            if (line.length === 0) lines.delete(owner);
          }
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
        const line = lines.get(owner);
        if (line) line.push(turn);
        else lines.set(owner, [turn]);
      });
    } else {
      active++;
    }
    try {
      return await work();
    } finally {
      // The slot passes straight to the next in line, still counted: it wakes a microtask later,
      // and a call made in between would otherwise find the slot free and run beside it.
      const next = nextInLine();
      if (next) next();
      else active--;
    }
  };
}
