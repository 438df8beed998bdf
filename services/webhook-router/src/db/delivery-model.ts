import { Schema, type Connection } from 'mongoose';

/** One customer webhook to one URL, and where it stands. */
export interface DeliveryDoc {
  /** `<webhook-id>:<target>`. */
  _id: string;
  environment_id: string;
  webhook_id: string;
  target: 'primary' | 'secondary';
  kind: 'forward' | 'auth';
  url: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Every attempt, as it went. */
export interface DeliveryAttemptDoc {
  _id: string;
  environment_id: string;
  delivery: string;
  webhook_id: string;
  attempt: number;
  url: string;
  /** The receiver's status, or null when none came (see error). */
  status: number | null;
  /** connection_refused, timeout, upstream_not_allowed, … (never a URL or a body). */
  error: string | null;
  duration_ms: number;
  at: Date;
}

const deliverySchema = new Schema<DeliveryDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    webhook_id: { type: String, required: true },
    target: { type: String, required: true },
    kind: { type: String, required: true },
    url: { type: String, required: true },
    status: { type: String, required: true },
    attempts: { type: Number, required: true },
    last_status: { type: Number, default: null },
    last_error: { type: String, default: null },
    next_attempt_at: { type: Date, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { collection: 'webhook_deliveries', versionKey: false },
);
deliverySchema.index({ environment_id: 1, created_at: -1 });

const attemptSchema = new Schema<DeliveryAttemptDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    delivery: { type: String, required: true },
    webhook_id: { type: String, required: true },
    attempt: { type: Number, required: true },
    url: { type: String, required: true },
    status: { type: Number, default: null },
    error: { type: String, default: null },
    duration_ms: { type: Number, required: true },
    at: { type: Date, required: true },
  },
  { collection: 'webhook_attempts', versionKey: false },
);
attemptSchema.index({ delivery: 1, at: 1 });

export const deliveryModel = (connection: Connection) => connection.model<DeliveryDoc>('WebhookDelivery', deliverySchema);
export const deliveryAttemptModel = (connection: Connection) => connection.model<DeliveryAttemptDoc>('WebhookAttempt', attemptSchema);
