import { Schema, type Connection } from 'mongoose';

export interface RefreshFailure {
  /** Calendar days (UTC, YYYY-MM-DD) on which refreshing failed: several mean it is exhausted. */
  days: string[];
  last_at: Date;
  /** No new attempt before this, unless forced. */
  backoff_until: Date;
  /** The provider's answer, without secrets, for the 424 payload. */
  last_error: { code: string; message: string; payload?: Record<string, unknown> };
}

export interface ConnectionDoc {
  _id: string;
  /** The public integer id of the API document. */
  id: number;
  environment_id: string;
  integration_id: string;
  provider_config_key: string;
  provider: string;
  connection_id: string;
  /** `NONE` for an unauthenticated connection. */
  credentials_type: string;
  /** The credentials object, encrypted as one JSON blob bound to environment, connection and field. */
  credentials: string;
  /**
   * Bumped by every write of `credentials` (connection-repo `replaceCredentials`), which
   * succeeds only if it still holds the value read: the fence that stops a refresher that lost
   * its lock, or a stale replica, from overwriting newer tokens. Absent on documents stored
   * before it existed, which reads as 0.
   */
  credentials_version?: number;
  /** When the token expires, in clear: refresh decisions need it before decrypting. */
  expires_at: Date | null;
  /**
   * When the vault asked for the token it holds (a refresh's start): with `expires_at`, how long
   * the token lives, for tokens whose answer is not kept with an `expires_in` (TWO_STEP, BILL,
   * SIGNATURE). Null or absent for credentials given to the vault (imports, connect flows).
   */
  token_obtained_at?: Date | null;
  metadata: Record<string, unknown>;
  connection_config: Record<string, unknown>;
  tags: Record<string, string>;
  end_user: Record<string, unknown> | null;
  errors: Array<{ type: 'auth' | 'sync'; log_id: string }>;
  /**
   * The latest finished run of each sync and variant (`<sync>:<variant>`): its run id when it
   * failed, null when it succeeded. A failed one shows in `errors` as `{type: 'sync'}`.
   */
  sync_runs?: Record<string, SyncRunState>;
  refresh_failure: RefreshFailure | null;
  /** Reconnect sessions may only target connections made through a connect session. */
  created_via_session: boolean;
  created_at: Date;
  updated_at: Date;
  last_fetched_at: Date | null;
  /**
   * True once the connection has its entries in the environment's lists (connection-lists.ts);
   * absent on connections stored before the lists, until the vault's start lists them.
   */
  listed?: boolean;
  /**
   * True once the connection has its entries in the search lists (its id's grams, or long
   * ids'); absent on connections stored before them, until the vault's background backfill.
   */
  searchable?: boolean;
}

export interface SyncRunState {
  failed_run: string | null;
  finished_at: Date;
}

const connectionSchema = new Schema<ConnectionDoc>(
  {
    _id: { type: String, required: true },
    id: { type: Number, required: true },
    environment_id: { type: String, required: true },
    integration_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    provider: { type: String, required: true },
    connection_id: { type: String, required: true },
    credentials_type: { type: String, required: true },
    credentials: { type: String, required: true },
    credentials_version: { type: Number, default: 0 },
    expires_at: { type: Date, default: null },
    token_obtained_at: { type: Date, default: undefined },
    metadata: { type: Schema.Types.Mixed, default: {} },
    connection_config: { type: Schema.Types.Mixed, default: {} },
    tags: { type: Schema.Types.Mixed, default: {} },
    end_user: { type: Schema.Types.Mixed, default: null },
    errors: { type: [{ _id: false, type: { type: String }, log_id: String }], default: [] },
    sync_runs: { type: Schema.Types.Mixed, default: undefined },
    refresh_failure: { type: Schema.Types.Mixed, default: null },
    created_via_session: { type: Boolean, default: false },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
    last_fetched_at: { type: Date, default: null },
    listed: { type: Boolean },
    searchable: { type: Boolean },
  },
  { collection: 'connections', versionKey: false, minimize: false, suppressReservedKeysWarning: true },
);
connectionSchema.index({ environment_id: 1, provider_config_key: 1, connection_id: 1 }, { unique: true });
connectionSchema.index({ id: 1 }, { unique: true });
connectionSchema.index({ environment_id: 1, connection_id: 1 });
connectionSchema.index({ environment_id: 1, created_at: 1 });

export const connectionModel = (connection: Connection) => connection.model<ConnectionDoc>('Connection', connectionSchema);

/**
 * Where a connection lives, by the name callers use: `_id` is `connectionKey(environment,
 * integration, connection id)`, so finding a connection by that name is one `_id` lookup here and
 * one on `connections`, both index lookups on every backend (FerretDB pushes down only `{_id}`).
 * Kept beside each connection by the repo; `connections` stays the truth (its unique index holds).
 */
export interface ConnectionKeyDoc {
  _id: string;
  connection: string;
}

/** The key's `_id`: a JSON array, so no value can run into the next one. */
export const connectionKey = (environment: string, providerConfigKey: string, connectionId: string) => JSON.stringify([environment, providerConfigKey, connectionId]);

const connectionKeySchema = new Schema<ConnectionKeyDoc>(
  { _id: { type: String, required: true }, connection: { type: String, required: true } },
  { collection: 'connection_keys', versionKey: false },
);

export const connectionKeyModel = (connection: Connection) => connection.model<ConnectionKeyDoc>('ConnectionKey', connectionKeySchema);

/**
 * A list of an environment's connections: all of them, or those of one integration, tag or end
 * user; for search, those whose lowercased connection id holds one gram (three characters,
 * connection-grams.ts), and those whose id is too long to be split into grams. `_id` is
 * `connectionListKey(environment, list)`.
 */
export type ConnectionList =
  | ['all']
  | ['integration', providerConfigKey: string]
  | ['tag', key: string, value: string]
  | ['end_user', id: string]
  | ['gram', gram: string]
  | ['long_id'];

/**
 * A list's entries are numbered 1, 2, 3… with no gap (each number is taken by inserting its
 * entry, which the unique `_id` lets only one writer do); the head holds a number at or below the
 * last one taken, from which a reader looks for later entries.
 */
export interface ConnectionListHeadDoc {
  _id: string;
  top: number;
}

/**
 * One entry, never changed or removed: the connection's `_id` and connection id, and `t`, the
 * time it was listed (ms), at or after the connection's `created_at` and never below the
 * previous entry's, so a reader walking down from the top knows when nothing newer can follow.
 * A connection that left the list since, or is gone, is skipped by the reader.
 */
export interface ConnectionListEntryDoc {
  _id: string;
  c: string;
  n: string;
  t: number;
}

/** A list head's `_id`: a JSON array, so no value can run into the next one. */
export const connectionListKey = (environment: string, list: ConnectionList) => JSON.stringify([environment, ...list]);
/** An entry's `_id`: the list's key and the entry's number. */
export const connectionListEntryKey = (environment: string, list: ConnectionList, entry: number) => JSON.stringify([environment, ...list, entry]);

const connectionListHeadSchema = new Schema<ConnectionListHeadDoc>(
  { _id: { type: String, required: true }, top: { type: Number, required: true } },
  { collection: 'connection_lists', versionKey: false },
);
const connectionListEntrySchema = new Schema<ConnectionListEntryDoc>(
  { _id: { type: String, required: true }, c: { type: String, required: true }, n: { type: String, required: true }, t: { type: Number, required: true } },
  { collection: 'connection_list_entries', versionKey: false },
);

export const connectionListHeadModel = (connection: Connection) => connection.model<ConnectionListHeadDoc>('ConnectionListHead', connectionListHeadSchema);
export const connectionListEntryModel = (connection: Connection) => connection.model<ConnectionListEntryDoc>('ConnectionListEntry', connectionListEntrySchema);
