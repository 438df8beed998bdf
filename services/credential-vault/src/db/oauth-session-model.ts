import { Schema, type Connection } from 'mongoose';

/**
 * One authorization in flight, found by its `state` and consumed once: for OAuth 2 the random
 * `state` we sent, for OAuth 1.0a the temporary token the provider issued (its callback names
 * only that token).
 */
export interface OAuthSessionDoc {
  _id: string;
  environment_id: string;
  /** The random `state` sent to the provider; unique. */
  state: string;
  /** Digest of the connect session that started it: the callback acts for that session only. */
  session_digest: string;
  integration: string;
  redirect_uri: string;
  /** The PKCE verifier, encrypted; null when the provider disables PKCE. */
  code_verifier: string | null;
  /** OAuth 1.0a: the temporary token's secret, encrypted; null for OAuth 2. */
  request_token_secret?: string | null;
  /** The end user's own OAuth client `{client_id, client_secret}`, encrypted JSON; null when the integration's is used. */
  client_override?: string | null;
  connection_config: Record<string, string>;
  created_at: Date;
  expires_at: Date;
}

const oauthSessionSchema = new Schema<OAuthSessionDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    state: { type: String, required: true },
    session_digest: { type: String, required: true },
    integration: { type: String, required: true },
    redirect_uri: { type: String, required: true },
    code_verifier: { type: String, default: null },
    request_token_secret: { type: String, default: null },
    client_override: { type: String, default: null },
    connection_config: { type: Schema.Types.Mixed, default: {} },
    created_at: { type: Date, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'oauth_sessions', versionKey: false, minimize: false },
);
oauthSessionSchema.index({ state: 1 }, { unique: true });
oauthSessionSchema.index({ expires_at: 1 });

export const oauthSessionModel = (connection: Connection) => connection.model<OAuthSessionDoc>('OAuthSession', oauthSessionSchema);

export function createOAuthSessionRepo(connection: Connection) {
  const model = oauthSessionModel(connection);
  return {
    init: () => model.init(),
    insert: (doc: OAuthSessionDoc) => model.create(doc),
    /** The state's one use: whoever deletes it first owns it (a delete is atomic per document). */
    async consume(state: string): Promise<OAuthSessionDoc | null> {
      const doc = await model.findOne({ state }).lean<OAuthSessionDoc>().exec();
      if (!doc) return null;
      const { deletedCount } = await model.deleteOne({ _id: doc._id }).exec();
      return deletedCount === 1 ? doc : null;
    },
    /** Flows past their expiry (the end user never came back), which `consume` would never see. */
    removeExpired: async (now: Date) => (await model.deleteMany({ expires_at: { $lt: now } }).exec()).deletedCount,
  };
}

export type OAuthSessionRepo = ReturnType<typeof createOAuthSessionRepo>;
