import { Schema, type Connection } from 'mongoose';
import type { Scope } from '@latchkey/contracts';

export interface ApiKeyDoc {
  _id: string;
  environment_id: string;
  account_id: string;
  display_name: string;
  /** `full_access`, or the chosen scopes. */
  scopes: 'full_access' | Scope[];
  /** Keyed SHA-256 of the secret; the secret itself is never stored. */
  digest: string;
  /** The first characters of the secret, to tell keys apart in lists. */
  hint: string;
  created_at: Date;
  last_used_at: Date | null;
}

const apiKeySchema = new Schema<ApiKeyDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    account_id: { type: String, required: true },
    display_name: { type: String, required: true },
    scopes: { type: Schema.Types.Mixed, required: true },
    digest: { type: String, required: true },
    hint: { type: String, required: true },
    created_at: { type: Date, required: true },
    last_used_at: { type: Date, default: null },
  },
  { collection: 'api_keys', versionKey: false },
);
apiKeySchema.index({ digest: 1 }, { unique: true });
apiKeySchema.index({ environment_id: 1, created_at: 1 });

export const apiKeyModel = (connection: Connection) => connection.model<ApiKeyDoc>('ApiKey', apiKeySchema);

/**
 * Where a digest's key lives: `_id` is the digest, so authenticating is one `_id` lookup here and
 * one on `api_keys`, both index lookups on every backend (FerretDB pushes down only `{_id}`).
 * Kept beside each key by the repo; `api_keys` stays the truth (its unique digest index holds).
 */
export interface ApiKeyDigestDoc {
  _id: string;
  key_id: string;
  environment_id: string;
}

const apiKeyDigestSchema = new Schema<ApiKeyDigestDoc>(
  {
    _id: { type: String, required: true },
    key_id: { type: String, required: true },
    environment_id: { type: String, required: true },
  },
  { collection: 'api_key_digests', versionKey: false },
);

export const apiKeyDigestModel = (connection: Connection) => connection.model<ApiKeyDigestDoc>('ApiKeyDigest', apiKeyDigestSchema);
