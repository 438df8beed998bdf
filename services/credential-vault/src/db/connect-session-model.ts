import { Schema, type Connection } from 'mongoose';

/** A short-lived authorization for one end user's connect flow. Only the token's digest is kept. */
export interface ConnectSessionDoc {
  _id: string;
  environment_id: string;
  /** SHA-256 of the token: a 256-bit random secret needs no key against guessing. */
  digest: string;
  tags: Record<string, string>;
  allowed_integrations: string[] | null;
  /** As the customer gave them, less a non-empty `oauth_client_secret_override` (see `client_secrets`). */
  integrations_config_defaults: Record<string, { connection_config: Record<string, unknown> }>;
  /** The customer's OAuth client secrets for the flows, by integration, encrypted. */
  client_secrets?: Record<string, string>;
  overrides: Record<string, { docs_connect?: string | undefined }>;
  end_user: Record<string, unknown> | null;
  organization: Record<string, unknown> | null;
  reconnect: { connection_id: string; integration_id: string } | null;
  created_at: Date;
  /** Checked on every use; expired sessions are deleted when next touched, or by the vault's sweep. */
  expires_at: Date;
}

const connectSessionSchema = new Schema<ConnectSessionDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    digest: { type: String, required: true },
    tags: { type: Schema.Types.Mixed, default: {} },
    allowed_integrations: { type: [String], default: null },
    integrations_config_defaults: { type: Schema.Types.Mixed, default: {} },
    client_secrets: { type: Schema.Types.Mixed, default: {} },
    overrides: { type: Schema.Types.Mixed, default: {} },
    end_user: { type: Schema.Types.Mixed, default: null },
    organization: { type: Schema.Types.Mixed, default: null },
    reconnect: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'connect_sessions', versionKey: false, minimize: false },
);
connectSessionSchema.index({ digest: 1 }, { unique: true });
connectSessionSchema.index({ expires_at: 1 });

export const connectSessionModel = (connection: Connection) => connection.model<ConnectSessionDoc>('ConnectSession', connectSessionSchema);

/**
 * One connection a session created: `_id` is `<session digest>:<n>`, n from 1 to the session's
 * cap, and a connect flow takes the first n free by inserting it. An insert with a unique `_id`
 * is the one write FerretDB decides atomically (an update there reads the document and writes
 * it back, so concurrent counts on the session document lose each other). Swept with the session.
 */
export interface ConnectSessionSlotDoc {
  _id: string;
  /** The session's: the sweep deletes the slots with it. */
  expires_at: Date;
}

const connectSessionSlotSchema = new Schema<ConnectSessionSlotDoc>(
  {
    _id: { type: String, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'connect_session_slots', versionKey: false },
);
connectSessionSlotSchema.index({ expires_at: 1 });

export const connectSessionSlotModel = (connection: Connection) => connection.model<ConnectSessionSlotDoc>('ConnectSessionSlot', connectSessionSlotSchema);
