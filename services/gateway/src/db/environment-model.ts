import { Schema, type Connection } from 'mongoose';
import type { SigningKey } from '../domain/signing-keys.js';

export interface EnvironmentDoc {
  _id: string;
  account_id: string;
  name: string;
  public_id: string;
  webhook_url: string | null;
  webhook_url_secondary: string | null;
  send_auth_webhooks: boolean;
  callback_url: string | null;
  /** Origins the Connect UI may return to (`return_url`) and post its outcome to; absent on older documents. */
  connect_return_origins?: string[];
  variables: Array<{ name: string; value: string }>;
  signing_keys: SigningKey[];
  /**
   * The digest of the last BOOTSTRAP_SECRET_KEY a key was made for: made once, a revoked
   * bootstrap key is not made again at the next start. Absent before a first one.
   */
  bootstrap_key_digest?: string;
  created_at: Date;
  updated_at: Date;
}

const environmentSchema = new Schema<EnvironmentDoc>(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    name: { type: String, required: true },
    public_id: { type: String, required: true },
    webhook_url: { type: String, default: null },
    webhook_url_secondary: { type: String, default: null },
    send_auth_webhooks: { type: Boolean, default: false },
    callback_url: { type: String, default: null },
    connect_return_origins: { type: [String], default: [] },
    variables: { type: [{ _id: false, name: String, value: String }], default: [] },
    signing_keys: { type: [{ _id: false, secret: String, created_at: Date, retired_at: Date }], default: [] },
    bootstrap_key_digest: { type: String },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { collection: 'environments', versionKey: false },
);
// The operator API addresses environments by name, webhooks by public id.
environmentSchema.index({ name: 1 }, { unique: true });
environmentSchema.index({ public_id: 1 }, { unique: true });

export const environmentModel = (connection: Connection) => connection.model<EnvironmentDoc>('Environment', environmentSchema);
