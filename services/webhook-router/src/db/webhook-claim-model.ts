import { Schema, type Connection } from 'mongoose';

/**
 * One provider webhook taken for routing, by what a replay of it would repeat: the first inbound
 * webhook to insert a key holds it until `expires_at`; any other with that key is a replay.
 */
export interface WebhookClaimDoc {
  /** A digest of environment, integration and replay key: the unique index that decides. */
  _id: string;
  environment_id: string;
  integration: string;
  /** The gateway's id of the webhook that holds the claim (its JetStream redeliveries hold it too). */
  inbound_id: string;
  claimed_at: Date;
  /** Removed by the router's sweep after this (FerretDB has no TTL indexes). */
  expires_at: Date;
}

const webhookClaimSchema = new Schema<WebhookClaimDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    integration: { type: String, required: true },
    inbound_id: { type: String, required: true },
    claimed_at: { type: Date, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'inbound_webhook_claims', versionKey: false },
);
webhookClaimSchema.index({ expires_at: 1 });

export const webhookClaimModel = (connection: Connection) => connection.model<WebhookClaimDoc>('InboundWebhookClaim', webhookClaimSchema);
