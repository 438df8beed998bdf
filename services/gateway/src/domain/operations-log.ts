import { consumeBatches, type Bus, type RunningConsumer } from '@latchkey/bus';
import { OPERATION_OWNERS, operationsContracts, operationsDurableOf, streamOf, type OperationRecorder } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { OperationRepo } from '../db/operation-repo.js';
import { fromDatabase } from '../db/unavailable.js';

const DAY_MS = 24 * 3600_000;

/**
 * Stores the operations every service records: one durable consumer per recording service (each
 * pinned to that service's subject, so a service can only ever log its own types: its pages are
 * checked against its schema as they are read), in batches, one unordered insert per batch of
 * messages. A message delivered twice is harmless (`insert` makes the same pages from it, and
 * skips those it has).
 */
export async function consumeOperations(deps: { bus: Bus; logger: Logger; operations: Pick<OperationRepo, 'insert'> }): Promise<RunningConsumer[]> {
  return Promise.all(
    (Object.keys(OPERATION_OWNERS) as OperationRecorder[]).map((service) => {
      const contract = operationsContracts[service];
      return consumeBatches({
        bus: deps.bus,
        logger: deps.logger,
        stream: streamOf(contract),
        durable: operationsDurableOf(service),
        contract,
        batchSize: 50,
        concurrency: 1,
        handler: async (items) => {
          try {
            await deps.operations.insert(service, items.map(({ payload }) => payload));
          } catch (error) {
            // The database away is retried (nak with back-off), not given up.
            throw fromDatabase(error) ?? error;
          }
          return items.map(() => ({ ok: true }));
        },
      });
    }),
  );
}

/**
 * Keeps the log bounded: drops operations older than the retention and, per environment, those
 * past the newest `maxPerEnvironment`. Idempotent `_id`-range deletes, so every replica may
 * sweep on its own timer (no lease needed: two sweeps at once delete the same documents).
 */
export function operationsSweeper(
  deps: { operations: Pick<OperationRepo, 'sweep'>; environments: { list(): Promise<Array<{ _id: string }>> }; logger: Pick<Logger, 'info' | 'warn'> },
  options: { retentionDays: number; maxPerEnvironment: number },
) {
  return async function sweep(now = Date.now()): Promise<number> {
    const before = new Date(now - options.retentionDays * DAY_MS);
    let deleted = 0;
    for (const environment of await deps.environments.list()) {
      deleted += await deps.operations.sweep(environmentId(environment._id), before, options.maxPerEnvironment);
    }
    if (deleted > 0) deps.logger.info('swept the operations log', { deleted });
    return deleted;
  };
}
