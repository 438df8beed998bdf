import { Schema, type Connection } from 'mongoose';

/**
 * Reads of plaintext credentials: who (API key), what (connection), when. Reads by one key of
 * one connection within one flush interval share a document, with their count and the first
 * and last time.
 */
export interface CredentialReadDoc {
  _id: string;
  environment_id: string;
  connection: string;
  key_id: string;
  /**
   * The NATS identity that asked, from the subject NATS authorised (`callerOf`), never from the
   * payload: `key_id` is what that caller vouches for, `caller` is who it is.
   */
  caller?: string;
  purpose: 'fetch' | 'import' | 'proxy';
  at: Date;
  last_at: Date;
  count: number;
}

const credentialReadSchema = new Schema<CredentialReadDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: String, required: true },
    key_id: { type: String, required: true },
    caller: { type: String },
    purpose: { type: String, required: true },
    at: { type: Date, required: true },
    last_at: { type: Date, required: true },
    count: { type: Number, required: true },
  },
  { collection: 'credential_reads', versionKey: false },
);
credentialReadSchema.index({ environment_id: 1, connection: 1, at: -1 });

export const credentialReadModel = (connection: Connection) => connection.model<CredentialReadDoc>('CredentialRead', credentialReadSchema);
