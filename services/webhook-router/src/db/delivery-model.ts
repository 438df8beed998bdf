import type { WebhookDelivery } from '@latchkey/contracts';
import { Schema, type Connection } from 'mongoose';

/**
 * Every attempt at a delivery (one customer webhook to one URL), with where the delivery stood
 * after it: the latest attempt of a delivery is its state. Append-only.
 */
export interface DeliveryAttemptDoc {
  _id: string;
  environment_id: string;
  /** `<webhook-id>:<target>`. */
  delivery: string;
  webhook_id: string;
  target: 'primary' | 'secondary';
  kind: WebhookDelivery['kind'];
  /** Where the attempt went (the target's URL then; the one it was made for when nothing was sent). */
  url: string;
  /** 1 for the first attempt; waits for an open circuit are not attempts. */
  attempt: number;
  /** The receiver's status, or null when none came (see error). */
  status: number | null;
  /** connection_refused, timeout, upstream_not_allowed, … (never a URL or a body). */
  error: string | null;
  duration_ms: number;
  /**
   * delivered · retrying (at next_attempt_at) · failed (final answer, the retry window closed,
   * or, nothing sent, its target's URL removed: error `webhook_url_removed`, or its parked
   * message refused for good by JOBS on its way back: error `requeue_failed`).
   */
  outcome: 'delivered' | 'retrying' | 'failed';
  next_attempt_at: Date | null;
  created_at: Date;
  at: Date;
}

const attemptSchema = new Schema<DeliveryAttemptDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    delivery: { type: String, required: true },
    webhook_id: { type: String, required: true },
    target: { type: String, required: true },
    kind: { type: String, required: true },
    url: { type: String, required: true },
    attempt: { type: Number, required: true },
    status: { type: Number, default: null },
    error: { type: String, default: null },
    duration_ms: { type: Number, required: true },
    outcome: { type: String, required: true },
    next_attempt_at: { type: Date, default: null },
    created_at: { type: Date, required: true },
    at: { type: Date, required: true },
  },
  { collection: 'webhook_attempts', versionKey: false },
);
attemptSchema.index({ environment_id: 1, delivery: 1, at: 1 });
// The retention sweep's, across environments.
attemptSchema.index({ at: 1 });

export const deliveryAttemptModel = (connection: Connection) => connection.model<DeliveryAttemptDoc>('WebhookAttempt', attemptSchema);
