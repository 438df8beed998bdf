import { Schema, type Connection } from 'mongoose';
import type { SignatureVerdict } from '../domain/provider-signature.js';

/** What became of a provider's webhook: the inbound log. */
export interface InboundWebhookDoc {
  /** The gateway's id (`iwh_…`): a redelivered job writes the same document again. */
  _id: string;
  environment_id: string;
  integration: string;
  provider: string | null;
  /** forwarded · not_forwarded (forward_webhooks off or no webhook URL) · rejected (see reason). */
  status: 'forwarded' | 'not_forwarded' | 'rejected';
  /**
   * Why it was rejected or not forwarded: bad_signature, missing_signature, stale_timestamp,
   * unsigned_not_accepted, replayed, unknown_integration, forward_webhooks_off, no_webhook_url.
   */
  reason: string | null;
  signature: SignatureVerdict | null;
  connection_id: string | null;
  /** The webhook-id its forwarded copy carries. */
  webhook_id: string | null;
  received_at: Date;
  processed_at: Date;
}

const inboundWebhookSchema = new Schema<InboundWebhookDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    integration: { type: String, required: true },
    provider: { type: String, default: null },
    status: { type: String, required: true },
    reason: { type: String, default: null },
    signature: { type: String, default: null },
    connection_id: { type: String, default: null },
    webhook_id: { type: String, default: null },
    received_at: { type: Date, required: true },
    processed_at: { type: Date, required: true },
  },
  { collection: 'inbound_webhooks', versionKey: false },
);
inboundWebhookSchema.index({ environment_id: 1, received_at: -1 });
// The retention sweep's, across environments.
inboundWebhookSchema.index({ received_at: 1 });

export const inboundWebhookModel = (connection: Connection) => connection.model<InboundWebhookDoc>('InboundWebhook', inboundWebhookSchema);
