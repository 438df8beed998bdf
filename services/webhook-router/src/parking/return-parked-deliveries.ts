import type { Bus } from '@latchkey/bus';
import { webhookContracts } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';
import type { ParkedDeliveryRepo } from '../db/parked-delivery-repo.js';

export interface ReturnParkedDeps {
  logger: Logger;
  parked: Pick<ParkedDeliveryRepo, 'dueCollections' | 'deliveriesDueBy' | 'release' | 'dropIfDone'>;
  bus: Pick<Bus, 'enqueue'>;
  pollMs: number;
}

/** Parked deliveries read, and put back on JOBS, at a time. */
const BATCH = 64;

/**
 * Every `pollMs`, on every replica: the parked deliveries now due go back on JOBS, for the
 * deliveries consumer to attempt, and their waits end. Each goes under its wait's id as
 * `Nats-Msg-Id`, so replicas that return the same delivery at once make one message, and its
 * wait ends (by `_id`) only once JetStream stored it: a replica that dies midway leaves the rest
 * to the next poll. Returns a stop function, which lets the poll in progress finish.
 */
export function startReturningParked(deps: ReturnParkedDeps): { stop(): Promise<void> } {
  let stopped = false;
  let current: Promise<void> = Promise.resolve();
  let failures = 0;

  async function returnDueBy(by: number): Promise<void> {
    for await (const batch of deps.parked.deliveriesDueBy(by, BATCH)) {
      const enqueued = await Promise.allSettled(batch.map((doc) => deps.bus.enqueue(webhookContracts.deliver, doc.job, { msgId: doc._id })));
      await deps.parked.release(
        by,
        batch.filter((_, index) => enqueued[index]!.status === 'fulfilled').map((doc) => doc._id),
      );
      const failed = enqueued.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      if (failed) throw failed.reason;
      if (stopped) return;
    }
    await deps.parked.dropIfDone(by, new Date());
  }

  async function poll(): Promise<void> {
    for (const by of await deps.parked.dueCollections(new Date())) {
      if (stopped) return;
      await returnDueBy(by);
    }
  }

  let busy = false;
  const timer = setInterval(() => {
    // A long poll (a large backlog due at once) is not stacked upon: the next starts after it.
    if (busy) return;
    busy = true;
    current = poll()
      .then(() => {
        failures = 0;
      })
      .catch((error: unknown) => {
        // The database or JetStream away: the next poll tries again; said once, then every 60th time.
        failures += 1;
        if (failures === 1 || failures % 60 === 0) deps.logger.warn('could not return parked webhook deliveries; retrying', { failures, error });
      })
      .finally(() => {
        busy = false;
      });
  }, deps.pollMs);
  timer.unref();

  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await current;
    },
  };
}
