import { Schema, type Connection } from 'mongoose';

/** One read of plaintext credentials: who (API key), what (connection), when. */
export interface CredentialReadDoc {
  _id: string;
  environment_id: string;
  connection: string;
  key_id: string;
  purpose: 'fetch' | 'import' | 'proxy';
  at: Date;
}

const credentialReadSchema = new Schema<CredentialReadDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: String, required: true },
    key_id: { type: String, required: true },
    purpose: { type: String, required: true },
    at: { type: Date, required: true },
  },
  { collection: 'credential_reads', versionKey: false },
);
credentialReadSchema.index({ environment_id: 1, connection: 1, at: -1 });

export const credentialReadModel = (connection: Connection) => connection.model<CredentialReadDoc>('CredentialRead', credentialReadSchema);
