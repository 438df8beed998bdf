import { z } from 'zod';
import { defineBroadcast, defineEvent, defineRequest } from './define.js';
import { anyCredentials } from './credentials.js';
import { allowedHostsSchema } from './proxy.js';

const environment_id = z.string().min(1);
const uniqueKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'letters, digits, ., _ and -; up to 128');
const stringMap = z.record(z.string(), z.string());
const timestamp = z.string();

/** Keys of stored objects become field names: no `.` anywhere, no leading `$`. */
const fieldName = z.string().min(1).max(128).regex(/^[^.$][^.]*$/, 'may not contain "." or start with "$"');

/** Integrations one connection list may filter by (each is a list read of its own). */
export const LIST_FILTER_MAX_INTEGRATIONS = 100;

/** The tags one connection holds at most: a filter by more can match none. */
export const TAGS_MAX = 10;
/** At most `TAGS_MAX` entries (a tag list, or a filter by tags). */
export const fewTags = (tags: Record<string, string>) => Object.keys(tags).length <= TAGS_MAX;

/** Tags: at most 10, values up to 255 characters, keys lower-cased by the vault. */
export const tagsSchema = z.record(fieldName.max(64), z.string().max(255)).refine(fewTags, `at most ${TAGS_MAX} tags`);

/**
 * How deep metadata and connection config may nest below their top: far more than any provider's
 * configuration needs, and within MongoDB's 100 levels wherever they are stored.
 */
export const METADATA_MAX_DEPTH = 32;

/**
 * Free-form metadata: any JSON, with field-safe keys at every depth (reported at their path),
 * nested at most `METADATA_MAX_DEPTH` levels. Walked without recursion: a small body nested
 * thousands deep is one issue, not a stack overflow answered 500.
 */
export const metadataSchema = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  const pending: Array<{ node: unknown; path: PropertyKey[] }> = [{ node: value, path: [] }];
  while (pending.length > 0) {
    const { node, path } = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (path.length >= METADATA_MAX_DEPTH) {
      ctx.addIssue({ code: 'custom', message: `nested deeper than ${METADATA_MAX_DEPTH} levels`, path });
      return;
    }
    const children: Array<{ node: unknown; path: PropertyKey[] }> = [];
    if (Array.isArray(node)) node.forEach((item, index) => children.push({ node: item, path: [...path, index] }));
    else {
      for (const [key, item] of Object.entries(node)) {
        if (!fieldName.safeParse(key).success) {
          ctx.addIssue({ code: 'custom', message: 'keys may not contain "." or start with "$"', path: [...path, key] });
        }
        children.push({ node: item, path: [...path, key] });
      }
    }
    // Last pushed, first walked: children go in reversed, so they are walked in their order.
    for (let i = children.length - 1; i >= 0; i--) pending.push(children[i]!);
  }
});

/** The longest connection config value an end user types in; a webhook's lookup by one takes no longer. */
export const CONNECTION_CONFIG_VALUE_MAX = 1024;

/**
 * Connection config as an end user fills it in a connect flow: text for each field, as the
 * provider's URL, header and query templates expect it (an array passed a field's pattern as its
 * `String()` and was stored where those templates then failed). The customer's own defaults and
 * imports stay free-form (`metadataSchema`).
 */
export const enteredConnectionConfigSchema = z.record(fieldName, z.string().max(CONNECTION_CONFIG_VALUE_MAX));

/**
 * The end user a connection is for: its id is what `?endUserId` finds (up to 255), its tags'
 * keys become stored field names.
 */
export const endUserSchema = z.strictObject({
  id: z.string().min(1).max(255),
  email: z.string().max(320).nullable().optional(),
  display_name: z.string().max(255).nullable().optional(),
  tags: z
    .record(fieldName.max(64), z.string().max(255))
    .refine((tags) => Object.keys(tags).length <= 64, 'at most 64 tags')
    .optional(),
  organization: z.strictObject({ id: z.string().min(1).max(255), display_name: z.string().max(255).nullable().optional() }).nullable().optional(),
});

// ---- providers

export const publicProvider = z.object({
  name: z.string(),
  display_name: z.string(),
  logo_url: z.string().optional(),
  categories: z.array(z.string()),
  auth_mode: z.string(),
  authorization_url: z.string().optional(),
  token_url: z.string().optional(),
  connection_configuration: z.array(z.string()).optional(),
  post_connection_script: z.string().optional(),
  webhook_routing_script: z.string().optional(),
  proxy: z
    .object({
      base_url: z.string().optional(),
      decompress: z.boolean().optional(),
      paginate: z.record(z.string(), z.string().optional()).optional(),
    })
    .optional(),
  docs: z.string().optional(),
});

// ---- integrations

/** The API document's list form of an integration, exactly (what list, create and update answer). */
export const integrationListItem = z.object({
  unique_key: z.string(),
  provider: z.string(),
  logo: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const integration = integrationListItem.extend({
  display_name: z.string().optional(),
  forward_webhooks: z.boolean(),
  accept_unsigned_webhooks: z.boolean(),
  allowed_hosts: z.array(z.string()),
  integration_config: stringMap.optional(),
  custom: stringMap.optional(),
  credentials: stringMap.optional(),
  webhookSecret: z.string().optional(),
});

export const integrationWrite = z.strictObject({
  unique_key: uniqueKey,
  display_name: z.string().max(255).optional(),
  credentials: stringMap.optional(),
  integration_config: stringMap.optional(),
  custom: stringMap.optional(),
  forward_webhooks: z.boolean().optional(),
  /**
   * Take provider webhooks that carry no signature (a provider without a signature scheme in the
   * catalog, whose webhooks also lack `x-<provider>-signature-256`). Default false: refused.
   */
  accept_unsigned_webhooks: z.boolean().optional(),
  /** Hosts a `Base-Url-Override` may name and still get this integration's connections' credentials. */
  allowed_hosts: allowedHostsSchema.optional(),
});

// ---- connections

export const connectionError = z.object({ type: z.enum(['auth', 'sync']), log_id: z.string() });

export const connectionListItem = z.object({
  id: z.number().int(),
  connection_id: z.string(),
  provider: z.string(),
  provider_config_key: z.string(),
  created: timestamp,
  metadata: z.record(z.string(), z.unknown()).nullable(),
  tags: z.record(z.string(), z.string()),
  errors: z.array(connectionError),
});

export const connection = z.object({
  id: z.number().int(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  provider: z.string(),
  errors: z.array(connectionError),
  end_user: endUserSchema.nullable(),
  metadata: z.record(z.string(), z.unknown()),
  connection_config: z.record(z.string(), z.unknown()),
  tags: z.record(z.string(), z.string()),
  created_at: timestamp,
  updated_at: timestamp,
  last_fetched_at: timestamp.nullable(),
  credentials: z.record(z.string(), z.unknown()).optional(),
});
export type Connection = z.infer<typeof connection>;

export const connectionId = z.string().min(1).max(255);
/**
 * The id a new connection may take: not `.` or `..`, which a URL's path resolves away
 * (`/connections/.` is `/connections/`), so such a connection could never be read or deleted.
 */
export const newConnectionId = connectionId.refine((id) => id !== '.' && id !== '..', { message: 'not "." or ".."' });

/** A connect session as its end-user flow sees it: never the token or its digest. */
export const connectSession = z.object({
  environment_id: z.string(),
  tags: z.record(z.string(), z.string()),
  allowed_integrations: z.array(z.string()).nullable(),
  integrations_config_defaults: z.record(z.string(), z.object({ connection_config: z.record(z.string(), z.unknown()) })),
  overrides: z.record(z.string(), z.object({ docs_connect: z.string().optional() })),
  end_user: z.record(z.string(), z.unknown()).nullable(),
  organization: z.record(z.string(), z.unknown()).nullable(),
  reconnect: z.object({ connection_id: z.string(), integration_id: z.string() }).nullable(),
  created_at: timestamp,
  expires_at: timestamp,
});
export type ConnectSession = z.infer<typeof connectSession>;

/** The payload of `connection.*` events: identifies, never carries credentials. */
export const connectionEventSchema = z.object({
  environment_id,
  id: z.number().int(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  provider: z.string(),
  /** Set by connect flows: what happened, for auth webhooks. */
  operation: z.enum(['creation', 'override']).optional(),
  tags: z.record(z.string(), z.string()).optional(),
  end_user: z.record(z.string(), z.unknown()).nullable().optional(),
});


/** Who is reading: recorded in the credential-read audit. */
const reader = z.object({ key_id: z.string() });
/**
 * Whether the caller's key may read the integration's client credentials
 * (`integrations:read_credentials`): only then may it name a self-hosted provider's token host,
 * where the integration's client secret is sent. Absent: it may not.
 */
const readsClientSecrets = z.boolean().optional();

export const vaultContracts = {
  listProviders: defineRequest('vault.providers.list', z.object({ search: z.string().optional() }), z.array(publicProvider)),
  getProvider: defineRequest('vault.providers.get', z.object({ name: z.string() }), publicProvider),

  listIntegrations: defineRequest(
    'vault.integrations.list',
    z.object({ environment_id }),
    // The display name is for the Connect UI; GET /integrations answers the list form alone.
    z.array(integrationListItem.extend({ display_name: z.string().optional() })),
  ),
  createIntegration: defineRequest(
    'vault.integrations.create',
    z.object({ environment_id, provider: z.string().min(1) }).extend(integrationWrite.shape),
    integrationListItem,
  ),
  /** An integration; its client credentials for the gateway only, the vault knowing the caller by the subject. */
  getIntegration: defineRequest(
    'vault.integrations.get',
    z.object({ environment_id, unique_key: z.string(), include_webhook: z.boolean(), include_credentials: z.boolean() }),
    integration,
    { perCaller: true },
  ),
  updateIntegration: defineRequest(
    'vault.integrations.update',
    z.object({ environment_id, unique_key: z.string(), patch: integrationWrite.partial() }),
    integrationListItem,
  ),
  deleteIntegration: defineRequest(
    'vault.integrations.delete',
    z.object({ environment_id, unique_key: z.string() }),
    z.object({ success: z.literal(true) }),
  ),

  createConnection: defineRequest(
    'vault.connections.create',
    z.object({
      environment_id,
      reader,
      include_credentials: z.boolean(),
      reads_client_secrets: readsClientSecrets,
      provider_config_key: z.string(),
      connection_id: newConnectionId.optional(),
      credentials: anyCredentials,
      metadata: metadataSchema.optional(),
      connection_config: metadataSchema.optional(),
      tags: tagsSchema.optional(),
      end_user: endUserSchema.optional(),
    }),
    connection,
    // May answer with plaintext credentials: the vault audits the caller NATS authenticated.
    { perCaller: true },
  ),
  listConnections: defineRequest(
    'vault.connections.list',
    z.object({
      environment_id,
      connection_id: z.string().optional(),
      integration_ids: z.array(z.string()).max(LIST_FILTER_MAX_INTEGRATIONS).optional(),
      tags: z.record(z.string(), z.string()).refine(fewTags, `at most ${TAGS_MAX} tags`).optional(),
      end_user_id: z.string().optional(),
      search: z.string().optional(),
      limit: z.number().int().min(1).max(1000),
      page: z.number().int().min(0),
    }),
    z.array(connectionListItem),
  ),
  getConnection: defineRequest(
    'vault.connections.get',
    z.object({
      environment_id,
      reader,
      connection_id: connectionId,
      provider_config_key: z.string(),
      include_credentials: z.boolean(),
      include_refresh_token: z.boolean(),
      force_refresh: z.boolean(),
      refresh_vendor_app_jwt_token: z.boolean(),
    }),
    connection,
    { perCaller: true },
  ),
  /**
   * Every connection of one integration, for the scheduler: newest first, a page at a time, each
   * from where the last stopped (`before`, the `next` of the page before), so walking them all
   * reads each once. Names only: no credentials, no refresh, no stamp. A page may hold a few more
   * than `limit`; `next` is null at the end.
   */
  integrationConnections: defineRequest(
    'vault.connections.of_integration',
    z.object({ environment_id, provider_config_key: z.string(), limit: z.number().int().min(1).max(1000), before: z.number().int().min(1).optional() }),
    z.object({ connections: z.array(z.object({ id: z.number().int(), connection_id: z.string() })), next: z.number().int().min(1).nullable() }),
  ),
  /** Names a connection for other services (records, runs): no credentials, no refresh, no stamp. */
  resolveConnection: defineRequest(
    'vault.connections.resolve',
    z.object({ environment_id, connection_id: connectionId, provider_config_key: z.string() }),
    z.object({ id: z.number().int(), connection_id: z.string(), provider_config_key: z.string(), provider: z.string() }),
  ),
  patchConnection: defineRequest(
    'vault.connections.patch',
    z.object({ environment_id, connection_id: connectionId, provider_config_key: z.string(), tags: tagsSchema.optional(), end_user: endUserSchema.optional() }),
    z.object({ success: z.literal(true) }),
  ),
  deleteConnection: defineRequest(
    'vault.connections.delete',
    z.object({ environment_id, connection_id: connectionId, provider_config_key: z.string() }),
    z.object({ success: z.literal(true) }),
  ),
  writeMetadata: defineRequest(
    'vault.metadata.write',
    z.object({
      environment_id,
      connection_ids: z.array(connectionId).min(1).max(1000),
      provider_config_key: z.string(),
      metadata: metadataSchema,
      mode: z.enum(['replace', 'merge']),
    }),
    z.object({ success: z.literal(true) }),
  ),

  /**
   * Key rotation: re-wraps every data key under the newest key-encryption key; with
   * `data_keys`, also starts a new data key per environment and re-encrypts every stored
   * credential under it. Answers when done; serving goes on meanwhile.
   */
  rotateKeys: defineRequest(
    'vault.keys.rotate',
    z.object({ data_keys: z.boolean() }),
    z.object({ rewrapped: z.number(), unchanged: z.number(), failed: z.array(z.object({ id: z.string(), reason: z.string() })), reencrypted: z.number() }),
  ),

  createConnectSession: defineRequest(
    'vault.sessions.create',
    z.object({
      environment_id,
      reads_client_secrets: readsClientSecrets,
      tags: tagsSchema.optional(),
      allowed_integrations: z.array(z.string().min(1).max(128)).max(500).optional(),
      integrations_config_defaults: z.record(z.string(), z.object({ connection_config: metadataSchema }).strict()).optional(),
      overrides: z.record(z.string(), z.object({ docs_connect: z.url({ protocol: /^https?$/, error: 'an http(s) URL' }).optional() }).strict()).optional(),
      end_user: endUserSchema.optional(),
      organization: z.object({ id: z.string().min(1), display_name: z.string().nullable().optional() }).strict().optional(),
      reconnect: z.object({ connection_id: connectionId, integration_id: z.string().min(1).max(128) }).optional(),
    }),
    z.object({ token: z.string(), expires_at: z.string() }),
  ),
  getConnectSession: defineRequest('vault.sessions.get', z.object({ token: z.string() }), connectSession),
  /**
   * An end user's credentials, entered in the connect flow, for an integration the session
   * allows: creates a connection with a server-chosen id (or, for a reconnect session, replaces
   * the credentials of its connection).
   */
  connectWithSession: defineRequest(
    'vault.sessions.connect',
    z.object({
      token: z.string(),
      integration: z.string().min(1).max(128),
      credentials: anyCredentials,
      connection_config: enteredConnectionConfigSchema.optional(),
    }),
    z.object({ connectionId: z.string(), providerConfigKey: z.string(), operation: z.enum(['creation', 'override']) }),
  ),
  /** Starts an OAuth 2 authorization for a session: the provider URL to send the end user to. */
  startOAuth: defineRequest(
    'vault.oauth.start',
    z.object({
      token: z.string(),
      integration: z.string().min(1).max(128),
      redirect_uri: z.url(),
      connection_config: enteredConnectionConfigSchema.optional(),
      authorization_params: z.record(z.string(), z.string()).optional(),
      /**
       * The end user's own OAuth client, allowed only when the session's defaults name
       * `oauth_client_id_override` / `oauth_client_secret_override` for the integration.
       */
      client_override: z.object({ client_id: z.string().min(1).max(1024), client_secret: z.string().min(1).max(4096) }).strict().optional(),
    }),
    z.object({ url: z.string() }),
  ),
  /** Completes it: checks the single-use state, exchanges the code, saves the connection. */
  finishOAuth: defineRequest(
    'vault.oauth.finish',
    /** `iss`: the authorization response's issuer (RFC 9207), when the provider sent one. */
    z.object({ state: z.string().min(1).max(256), code: z.string().min(1).max(4096), iss: z.string().min(1).max(2048).optional() }),
    // environment_id: the gateway posts the outcome page's message to that environment's registered origins only.
    z.object({ connectionId: z.string(), providerConfigKey: z.string(), operation: z.enum(['creation', 'override']), environment_id: z.string().optional() }),
  ),
  /**
   * The provider sent the end user back with an error instead of a code: the state is spent, and
   * the flow's environment named (the gateway posts the failure to its registered origins).
   */
  refuseOAuth: defineRequest('vault.oauth.refuse', z.object({ state: z.string().min(1).max(256) }), z.object({ environment_id: z.string() })),
  /** Completes an OAuth 1.0a authorization: the temporary token is single-use; its verifier buys the token credentials. */
  finishOAuth1: defineRequest(
    'vault.oauth1.finish',
    z.object({ oauth_token: z.string().min(1).max(1024), oauth_verifier: z.string().min(1).max(1024) }),
    // environment_id: the gateway posts the outcome page's message to that environment's registered origins only.
    z.object({ connectionId: z.string(), providerConfigKey: z.string(), operation: z.enum(['creation', 'override']), environment_id: z.string().optional() }),
  ),
  /** OAUTH2_CC from a connect flow: the end user's client is exchanged for a token before anything is saved. */
  connectClientCredentials: defineRequest(
    'vault.sessions.client_credentials',
    z.object({
      token: z.string(),
      integration: z.string().min(1).max(128),
      client_id: z.string().min(1).max(1024),
      client_secret: z.string().min(1).max(16_384),
      connection_config: enteredConnectionConfigSchema.optional(),
    }),
    z.object({ connectionId: z.string(), providerConfigKey: z.string(), operation: z.enum(['creation', 'override']) }),
  ),
  deleteConnectSession: defineRequest('vault.sessions.delete', z.object({ token: z.string() }), z.object({ success: z.literal(true) })),

  /** Every vault replica drops its cached copy of this connection (internal id). */
  connectionChanged: defineBroadcast('vault.connection.changed', z.object({ id: z.string() })),

  connectionCreated: defineEvent('connection.created', connectionEventSchema),
  connectionUpdated: defineEvent('connection.updated', connectionEventSchema),
  connectionDeleted: defineEvent('connection.deleted', connectionEventSchema),
  connectionRefreshFailed: defineEvent(
    'connection.refresh_failed',
    connectionEventSchema.extend({ log_id: z.string(), error: z.object({ code: z.string(), message: z.string() }) }),
  ),
  /**
   * A key no longer names the integration it named (deleted, or renamed) as of `at`: what was
   * kept under it before then (deployed functions) is that integration's, not a later one's.
   */
  integrationRemoved: defineEvent('integration.removed', z.object({ environment_id, unique_key: z.string(), at: timestamp })),
} as const;
