import { randomUUID } from 'node:crypto';
import type { Connection } from 'mongoose';
import type { EnvironmentId } from '@latchkey/mongo';
import { deliveryAttemptModel, deliveryModel, type DeliveryAttemptDoc, type DeliveryDoc } from './delivery-model.js';

export function createDeliveryRepo(connection: Connection) {
  const deliveries = deliveryModel(connection);
  const attempts = deliveryAttemptModel(connection);
  return {
    init: () => Promise.all([deliveries.init(), attempts.init()]),
    /** Records one attempt and where the delivery stands after it (upserted: the first attempt creates it). */
    async recordAttempt(
      environment: EnvironmentId,
      attempt: Omit<DeliveryAttemptDoc, '_id' | 'environment_id'>,
      state: Omit<DeliveryDoc, '_id' | 'environment_id' | 'updated_at' | 'last_status' | 'last_error' | 'attempts'>,
    ): Promise<void> {
      await attempts.create({ _id: randomUUID(), environment_id: environment, ...attempt });
      await deliveries
        .updateOne(
          { _id: attempt.delivery, environment_id: environment },
          { $set: { ...state, environment_id: environment, attempts: attempt.attempt, last_status: attempt.status, last_error: attempt.error, updated_at: attempt.at } },
          { upsert: true },
        )
        .exec();
    },
    find: (environment: EnvironmentId, id: string) => deliveries.findOne({ _id: id, environment_id: environment }).lean<DeliveryDoc>().exec(),
    attemptsOf: (environment: EnvironmentId, id: string) =>
      attempts.find({ delivery: id, environment_id: environment }).sort({ at: 1 }).lean<DeliveryAttemptDoc[]>().exec(),
  };
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>;
