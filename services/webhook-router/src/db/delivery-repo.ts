import type { Connection } from 'mongoose';
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
    /** A delivery's attempts, first to last; the last one says where it stands. */
    attemptsOf: (environment: EnvironmentId, delivery: string) =>
      attempts.find({ environment_id: environment, delivery }).sort({ at: 1 }).lean<DeliveryAttemptDoc[]>().exec(),
  };
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>;
