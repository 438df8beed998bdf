import type { Connection, QueryFilter } from 'mongoose';
import { pageByTime, type EnvironmentId } from '@latchkey/mongo';
import { deliveryAttemptModel, type DeliveryAttemptDoc } from './delivery-model.js';
import { createGroupCommit } from './group-commit.js';
import { insertNew } from './insert-new.js';

/**
 * The filters of the drain's reads (shared with the explain test): `_id` equalities, the one
 * filter FerretDB 1.24 answers from an index; the delivery's fields would make it read every
 * attempt, on every redelivery and every retry.
 */
export const deliveryQueries = {
  /** The attempt that delivered it: stored under this id, whatever its number. */
  delivered: (delivery: string) => ({ _id: `${delivery}:delivered` }),
  /** An attempt by number (a delivered one was stored so before the id above). */
  attempt: (delivery: string, attempt: number) => ({ _id: `${delivery}:${attempt}` }),
};

export function createDeliveryRepo(connection: Connection) {
  const attempts = deliveryAttemptModel(connection);
  const writes = createGroupCommit<DeliveryAttemptDoc>((docs) => insertNew(attempts, docs));
  return {
    init: () => attempts.init(),
    /**
     * Records one attempt. Its id is the delivery's and the attempt's number, so the record of
     * an attempt that a crash made JetStream hand over again is not doubled; the attempt that
     * delivered it has the delivery's `delivered` id instead, for `wasDelivered`.
     */
    recordAttempt: (environment: EnvironmentId, attempt: Omit<DeliveryAttemptDoc, '_id' | 'environment_id'>): Promise<void> => {
      const { _id } = attempt.outcome === 'delivered' ? deliveryQueries.delivered(attempt.delivery) : deliveryQueries.attempt(attempt.delivery, attempt.attempt);
      return writes.add({ ...attempt, _id, environment_id: environment });
    },
    /**
     * Whether an attempt of this delivery reached the customer already (a 2xx was recorded),
     * asked before its `attempt`-th attempt: by `_id` only, the delivered id and, for a
     * delivery recorded before that id existed, the previous attempt's.
     */
    wasDelivered: async (environment: EnvironmentId, delivery: string, attempt: number): Promise<boolean> => {
      const ids = [deliveryQueries.delivered(delivery), ...(attempt > 1 ? [deliveryQueries.attempt(delivery, attempt - 1)] : [])];
      const docs = await Promise.all(ids.map((filter) => attempts.collection.findOne(filter as never)));
      return docs.some((doc) => doc !== null && doc['environment_id'] === environment && doc['outcome'] === 'delivered');
    },
    /** Drops the attempts made before `before` (the retention sweep): the count dropped. */
    prune: async (before: Date): Promise<number> => (await attempts.deleteMany({ at: { $lt: before } }).exec()).deletedCount,
    /** A delivery's attempts, first to last; the last one says where it stands. */
    attemptsOf: (environment: EnvironmentId, delivery: string) =>
      attempts.find({ environment_id: environment, delivery }).sort({ at: 1 }).lean<DeliveryAttemptDoc[]>().exec(),
    /** The environment's attempts, newest first, for operators (a page ends between two times: `pageByTime`). */
    list: (environment: EnvironmentId, page: { limit: number; before?: Date; webhookId?: string; outcome?: DeliveryAttemptDoc['outcome'] }) => {
      const filter: QueryFilter<DeliveryAttemptDoc> = { environment_id: environment };
      if (page.webhookId !== undefined) filter.webhook_id = page.webhookId;
      if (page.outcome !== undefined) filter.outcome = page.outcome;
      return pageByTime(
        page.limit,
        (count) => attempts.find(page.before ? { ...filter, at: { $lt: page.before } } : filter).sort({ at: -1 }).limit(count).lean<DeliveryAttemptDoc[]>().exec(),
        (doc) => doc.at,
        (at) => attempts.find({ ...filter, at }).lean<DeliveryAttemptDoc[]>().exec(),
      );
    },
  };
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>;
