import type { Connection, QueryFilter } from 'mongoose';
import type { EnvironmentId } from '@latchkey/mongo';
import { deliveryAttemptModel, type DeliveryAttemptDoc } from './delivery-model.js';
import { createGroupCommit } from './group-commit.js';
import { insertNew } from './insert-new.js';

export function createDeliveryRepo(connection: Connection) {
  const attempts = deliveryAttemptModel(connection);
  const writes = createGroupCommit<DeliveryAttemptDoc>((docs) => insertNew(attempts, docs));
  return {
    init: () => attempts.init(),
    /**
     * Records one attempt. Its id is the delivery's and the JetStream delivery count, so the
     * record of an attempt that a crash made JetStream hand over again is not doubled.
     */
    recordAttempt: (environment: EnvironmentId, attempt: Omit<DeliveryAttemptDoc, '_id' | 'environment_id'>): Promise<void> =>
      writes.add({ ...attempt, _id: `${attempt.delivery}:${attempt.attempt}`, environment_id: environment }),
    /** Whether an attempt of this delivery reached the customer already (a 2xx was recorded). */
    wasDelivered: async (environment: EnvironmentId, delivery: string): Promise<boolean> =>
      (await attempts.exists({ environment_id: environment, delivery, outcome: 'delivered' })) !== null,
    /** A delivery's attempts, first to last; the last one says where it stands. */
    attemptsOf: (environment: EnvironmentId, delivery: string) =>
      attempts.find({ environment_id: environment, delivery }).sort({ at: 1 }).lean<DeliveryAttemptDoc[]>().exec(),
    /** The environment's attempts, newest first, for operators. */
    list: (environment: EnvironmentId, page: { limit: number; before?: Date; webhookId?: string; outcome?: DeliveryAttemptDoc['outcome'] }) => {
      const filter: QueryFilter<DeliveryAttemptDoc> = { environment_id: environment };
      if (page.before) filter.at = { $lt: page.before };
      if (page.webhookId !== undefined) filter.webhook_id = page.webhookId;
      if (page.outcome !== undefined) filter.outcome = page.outcome;
      return attempts.find(filter).sort({ at: -1 }).limit(page.limit).lean<DeliveryAttemptDoc[]>().exec();
    },
  };
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>;
