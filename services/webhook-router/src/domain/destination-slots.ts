/** A delivery's place among those in flight to its URL, held until its attempt ends. */
export interface DestinationSlot {
  release(): void;
}

/**
 * Deliveries in flight per customer URL, per replica, at most `perUrl` of the replica's slots
 * (`WEBHOOK_CONCURRENCY_PER_URL`). A receiver that answers 2xx, slowly, never opens its circuit:
 * with a backlog it would hold every slot, and every other environment's webhooks would wait
 * behind it. Kept by URL, as circuits are: the slow thing is a receiver, whichever environments
 * send to it, and an environment's other URL is another receiver.
 *
 * A delivery that finds its URL's share in flight waits here for a slot, first come first
 * served, only while the URL's pace says one frees within `waitMs`: the consumer fetches many
 * messages at once, and a burst to a quick receiver, handed back each time past its share, would
 * come back a slot of the park later, again and again. Its pace is how long its latest delivery
 * held a slot, or the one in flight the longest so far if longer. A URL not heard from yet is
 * taken for quick: its first burst (after a restart, every URL's) waits here, and parking it
 * cost each delivery seconds; a slow one's waiters give up after `waitMs`, once. Past that, or
 * after waiting `waitMs`, `take` answers null: the caller holds the delivery elsewhere.
 */
export function createDestinationSlots(options: { perUrl: number; waitMs: number; maxUrls?: number; now?: () => number }) {
  const now = options.now ?? (() => performance.now());
  const maxUrls = options.maxUrls ?? 10_000;
  /** The URLs with a delivery in flight: when each took its slot (oldest first), and those waiting for one. */
  const busy = new Map<string, { started: number[]; waiting: Array<(slot: DestinationSlot) => void> }>();
  /** How long each URL's latest delivery held its slot. */
  const paces = new Map<string, number>();

  function enter(url: string, state: { started: number[]; waiting: Array<(slot: DestinationSlot) => void> }): DestinationSlot {
    const startedAt = now();
    state.started.push(startedAt);
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        state.started.splice(state.started.indexOf(startedAt), 1);
        if (!paces.has(url) && paces.size >= maxUrls) paces.clear();
        paces.set(url, now() - startedAt);
        const next = state.waiting.shift();
        if (next) next(enter(url, state));
        else if (state.started.length === 0) busy.delete(url);
      },
    };
  }

  return {
    /** A slot for a delivery to `url`, at once or once one frees; null when the delivery is to wait elsewhere. */
    take(url: string): Promise<DestinationSlot | null> {
      let state = busy.get(url);
      if (!state) {
        state = { started: [], waiting: [] };
        busy.set(url, state);
      }
      if (state.started.length < options.perUrl) return Promise.resolve(enter(url, state));
      const pace = Math.max(paces.get(url) ?? 0, now() - state.started[0]!);
      if ((state.waiting.length + 1) * pace > options.perUrl * options.waitMs) return Promise.resolve(null);
      const { waiting } = state;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1);
          resolve(null);
        }, options.waitMs);
        const waiter = (slot: DestinationSlot) => {
          clearTimeout(timer);
          resolve(slot);
        };
        waiting.push(waiter);
      });
    },
  };
}

export type DestinationSlots = ReturnType<typeof createDestinationSlots>;
