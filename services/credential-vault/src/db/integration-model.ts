import { Schema, type Connection } from 'mongoose';

export interface IntegrationDoc {
  _id: string;
  environment_id: string;
  unique_key: string;
  provider: string;
  display_name: string | null;
  /** Client credentials (client_id, client_secret, …), encrypted as one JSON blob. */
  credentials: string | null;
  integration_config: Record<string, string>;
  custom: Record<string, string>;
  forward_webhooks: boolean;
  /** Provider webhooks without any signature are taken only when the customer turned this on. */
  accept_unsigned_webhooks: boolean;
  /** Hosts besides the provider's where a `Base-Url-Override` still gets credentials (lower-case). */
  allowed_hosts: string[];
  /** Shared secret that providers sign webhooks with; encrypted; made on first request. */
  webhook_secret: string | null;
  created_at: Date;
  updated_at: Date;
}

const integrationSchema = new Schema<IntegrationDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    unique_key: { type: String, required: true },
    provider: { type: String, required: true },
    display_name: { type: String, default: null },
    credentials: { type: String, default: null },
    integration_config: { type: Schema.Types.Mixed, default: {} },
    custom: { type: Schema.Types.Mixed, default: {} },
    forward_webhooks: { type: Boolean, default: true },
    // Integrations stored before this field existed read as false: unsigned webhooks refused.
    accept_unsigned_webhooks: { type: Boolean, default: false },
    allowed_hosts: { type: [String], default: [] },
    webhook_secret: { type: String, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { collection: 'integrations', versionKey: false, minimize: false },
);
integrationSchema.index({ environment_id: 1, unique_key: 1 }, { unique: true });

export const integrationModel = (connection: Connection) => connection.model<IntegrationDoc>('Integration', integrationSchema);
