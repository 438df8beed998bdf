/**
 * Writes that many handlers make at once, committed together: each `add` resolves when a write
 * holding its item is done (so a message is acked only after its record is stored), while at
 * most one write runs and the next one takes everything that queued meanwhile. One round trip
 * then serves a burst, which matters most on FerretDB, where every write is a commit.
 */
export function createGroupCommit<T>(write: (items: T[]) => Promise<void>, maxBatch = 500) {
  let queue: Array<{ item: T; resolve: () => void; reject: (error: unknown) => void }> = [];
  let running: Promise<void> | undefined;

  async function drain(): Promise<void> {
    while (queue.length > 0) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(batch.length);
      try {
        await write(batch.map((entry) => entry.item));
        for (const entry of batch) entry.resolve();
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    running = undefined;
  }

  return {
    add(item: T): Promise<void> {
      const done = new Promise<void>((resolve, reject) => queue.push({ item, resolve, reject }));
      // The first write starts after the current turn's synchronous adds (a batch's records) joined it.
      running ??= Promise.resolve().then(drain);
      return done;
    },
  };
}
