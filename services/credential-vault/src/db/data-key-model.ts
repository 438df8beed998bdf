import { Schema, type Connection } from 'mongoose';

/**
 * One data key of one environment. The key itself is never stored: only `wrapped`, its
 * AES-256-GCM encryption under the key-encryption key `kek_version` (base64 of iv | tag | ciphertext).
 */
export interface DataKeyDoc {
  _id: string;
  environment_id: string;
  /** 1, 2, ... within the environment; credential blobs name the version that sealed them. */
  version: number;
  wrapped: string;
  kek_version: string;
  created_at: Date;
  /** Set when a newer version took over new writes; a retired key still decrypts. */
  retired_at: Date | null;
}

const dataKeySchema = new Schema<DataKeyDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    version: { type: Number, required: true },
    wrapped: { type: String, required: true },
    kek_version: { type: String, required: true },
    created_at: { type: Date, required: true },
    retired_at: { type: Date, default: null },
  },
  { collection: 'data_keys', versionKey: false },
);
// At most one key per (environment, version): replicas racing to create one converge on the winner.
dataKeySchema.index({ environment_id: 1, version: 1 }, { unique: true });
// Rotation and "is this KEK still in use?" look keys up by the KEK that wraps them.
dataKeySchema.index({ kek_version: 1 });

export const dataKeyModel = (connection: Connection) => connection.model<DataKeyDoc>('DataKey', dataKeySchema);
