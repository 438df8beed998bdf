/** A task started by `repeatEvery`; `stop` clears its timer and waits for the run in progress. */
export interface Repeating {
  stop(): Promise<void>;
}

/**
 * Runs `task` every `everyMs`, one run at a time: a tick that comes while the last run is still
 * going is skipped, so a slow run (a large backlog, a database away) is never stacked upon. A run
 * that fails goes to `onError`, and the next tick runs again. The timer never keeps the process
 * alive by itself.
 */
export function repeatEvery(everyMs: number, task: () => Promise<unknown>, onError: (error: unknown) => void): Repeating {
  let current: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (current) return;
    // A task that throws before its promise fails as a rejected run does.
    current = Promise.resolve()
      .then(task)
      .then(
        () => undefined,
        (error: unknown) => onError(error),
      )
      .finally(() => {
        current = undefined;
      });
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await current;
    },
  };
}
