import { Blob } from 'node:buffer';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';
import got, { type Got, RequestError, TimeoutError } from 'got';
import { LatchkeyError, errorFromResponse } from './errors.js';
import { ACTION_TIMEOUT_MS, CALL_TIMEOUT_MS, proxyTimeoutMs } from './timeouts.js';
import { verifyWebhookSignature } from './webhook-signature.js';

export interface LatchkeyOptions {
  /** The gateway's base URL. Default `http://localhost:3003`. */
  host?: string;
  /** The environment's secret key. */
  apiKey?: string;
  /** @deprecated Use `apiKey`. */
  secretKey?: string;
  /**
   * How long a call waits for its answer, in milliseconds. By default each call waits longer than
   * the gateway may take to answer it (with the server's default settings): 30 s, `triggerAction`
   * 75 s (the gateway waits up to `FUNCTION_TIMEOUT_MS` + 10 s for the run), the proxy calls
   * 40 s × (`retries` + 1) + 10 s. Given here, it replaces those defaults for every call; a call's
   * own `timeoutMs` wins over it. A call with no answer in time rejects with code `timeout`:
   * the request may still complete on the server.
   */
  timeoutMs?: number;
  /** How many times a 429 is retried after waiting its `Retry-After`. Default 2; 0 turns it off. */
  rateLimitRetries?: number;
  /**
   * The environment's webhook signing key (`whsec_…`, shown when the environment is created or
   * its key rotated); `verifyIncomingWebhookRequest` checks with the API key when none is given.
   */
  webhookSigningKey?: string;
}

export interface EnvironmentVariable {
  name: string;
  value: string;
}

type Query = Record<string, string | number | boolean | undefined>;

export interface Provider {
  name: string;
  display_name: string;
  logo_url?: string;
  categories: string[];
  auth_mode: string;
  authorization_url?: string;
  token_url?: string;
  connection_configuration?: string[];
  proxy?: { base_url?: string; decompress?: boolean; paginate?: Record<string, string> };
  docs?: string;
}

/** The API document's list form of an integration (what list, create and update answer). */
export interface IntegrationListItem {
  unique_key: string;
  provider: string;
  logo: string;
  created_at: string;
  updated_at: string;
}

export interface Integration extends IntegrationListItem {
  display_name?: string;
  forward_webhooks: boolean;
  /** Whether provider webhooks without any signature are taken (default false: refused). */
  accept_unsigned_webhooks: boolean;
  /** Hosts besides the provider's where a `baseUrlOverride` still gets the connection's credentials. */
  allowed_hosts: string[];
  integration_config?: Record<string, string>;
  custom?: Record<string, string>;
  credentials?: Record<string, string>;
  webhook_url?: string;
  webhookSecret?: string;
}

export interface IntegrationInput {
  display_name?: string;
  credentials?: Record<string, string>;
  integration_config?: Record<string, string>;
  forward_webhooks?: boolean;
  /** Take provider webhooks that carry no signature; only for providers that cannot sign. */
  accept_unsigned_webhooks?: boolean;
  /** Hosts besides the provider's where a `baseUrlOverride` still gets the connection's credentials (`api.example.com`, `*.example.com`). */
  allowed_hosts?: string[];
}

export interface ConnectionListItem {
  id: number;
  connection_id: string;
  provider: string;
  provider_config_key: string;
  created: string;
  metadata: Record<string, unknown> | null;
  tags: Record<string, string>;
  errors: Array<{ type: 'auth' | 'sync'; log_id: string }>;
}

export interface Connection {
  id: number;
  connection_id: string;
  provider_config_key: string;
  provider: string;
  errors: Array<{ type: 'auth' | 'sync'; log_id: string }>;
  end_user: Record<string, unknown> | null;
  metadata: Record<string, unknown>;
  connection_config: Record<string, unknown>;
  tags: Record<string, string>;
  created_at: string;
  updated_at: string;
  last_fetched_at: string | null;
  credentials?: Record<string, unknown> & { type?: string };
}

export interface ConnectSessionInput {
  tags?: Record<string, string>;
  allowed_integrations?: string[];
  integrations_config_defaults?: Record<string, { connection_config: Record<string, unknown> }>;
  overrides?: Record<string, { docs_connect?: string }>;
  /** @deprecated use tags */
  end_user?: { id: string; email?: string | null; display_name?: string | null; tags?: Record<string, string> };
  /** @deprecated use tags */
  organization?: { id: string; display_name?: string | null };
}

export interface ConnectSessionCreated {
  token: string;
  connect_link: string;
  expires_at: string;
}

export type RecordAction = 'ADDED' | 'UPDATED' | 'DELETED';

/** A synced record: the sync's own fields, and where the record stands. */
export type SyncedRecord<T extends Record<string, unknown> = Record<string, unknown>> = T & {
  _metadata: {
    first_seen_at: string;
    last_modified_at: string;
    last_action: RecordAction;
    deleted_at: string | null;
    /** Read on from this record with `cursor`. */
    cursor: string;
    /** Set when the payload was pruned: only `id` remains. */
    pruned_at: string | null;
  };
};

/** What one run of a sync changed in one model. */
export interface SyncModelCounts {
  added: number;
  updated: number;
  deleted: number;
}

/** `GET /sync/status`: one sync of one connection in one variant. */
export interface SyncStatus {
  id: string;
  connection_id: string;
  name: string;
  variant: string;
  status: 'RUNNING' | 'PAUSED' | 'SUCCESS' | 'ERROR' | 'STOPPED';
  type: 'INCREMENTAL' | 'FULL';
  frequency: string;
  finishedAt: string | null;
  nextScheduledSyncAt: string | null;
  latestResult: Record<string, SyncModelCounts>;
  recordCount: Record<string, number>;
  latestError: { code: string; message: string } | null;
  /** The run in flight: when it started, and the records it wrote so far (in all, and per model); null when none runs. */
  progress: { startedAt: string | null; records: number; results: Record<string, SyncModelCounts> } | null;
}

/** A sync named alone (its base variant) or with a variant. */
export type SyncRef = string | { name: string; variant: string };

export interface ListRecordsOptions {
  providerConfigKey: string;
  connectionId: string;
  model: string;
  variant?: string;
  /** ISO 8601: only records changed after this instant. */
  modifiedAfter?: string;
  /** Which last actions to return, e.g. `'added,updated'` or `['deleted']`; all by default. */
  filter?: string | Array<'added' | 'updated' | 'deleted'>;
  /** 1 to 10,000; 100 by default. */
  limit?: number;
  cursor?: string | null;
  ids?: string[];
}

export type OperationType = 'proxy' | 'sync_run' | 'action_run' | 'webhook_inbound' | 'webhook_outbound' | 'connect' | 'refresh' | 'deploy';

/** One entry of the operations log (`GET /operations`). */
export interface Operation {
  id: string;
  type: OperationType;
  status: 'success' | 'failure';
  started_at: string;
  duration_ms: number;
  integration_id?: string;
  connection_id?: string;
  request_id?: string;
  trace_id?: string;
  error?: { code: string; message: string };
  proxy?: { method: string; path: string; upstream_status?: number };
}

export interface ListOperationsOptions {
  type?: OperationType | readonly OperationType[];
  status?: 'success' | 'failure';
  integrationId?: string;
  connectionId?: string;
  /** ISO 8601: started at or after. */
  from?: string;
  /** ISO 8601: started before. */
  to?: string;
  limit?: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string | null;
}

export interface MetadataResult {
  connection_id: string | string[];
  provider_config_key: string;
  metadata: Record<string, unknown>;
}

export interface AsyncActionHandle {
  id: string;
  /** `/action/<id>` */
  statusUrl: string;
}

export interface ScriptsConfigEntry {
  providerConfigKey: string;
  version: number;
  deployed_at: string;
  syncs: Array<{
    name: string;
    type: 'sync';
    description?: string;
    frequency: string;
    models: Array<{ name: string; fields: Array<{ name: string; type: string }> }>;
    webhookSubscriptions: string[];
  }>;
  actions: Array<{ name: string; type: 'action'; description?: string; has_input_schema: boolean }>;
  onEventScripts: Array<{ name: string; event: 'post-connection-creation' | 'pre-connection-deletion' }>;
}

// ---- proxy

/** Methods the proxy forwards. */
export type ProxyMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

/** How a proxy response body is read (the axios names). */
export type ProxyResponseType = 'arraybuffer' | 'blob' | 'document' | 'json' | 'text' | 'stream';

/** Query parameters: a record (arrays repeat the name; `undefined` is left out) or a ready query string. */
export type ProxyParams = string | URLSearchParams | Record<string, string | number | readonly (string | number)[] | undefined>;

/** One call through `/proxy/{endpoint}` to the provider's API, on behalf of a connection. */
export interface ProxyConfig {
  /** The path on the provider's API, e.g. `/v1/users/me` (leading slash optional; a query string may follow). */
  endpoint: string;
  /** The integration's unique key (`Provider-Config-Key`). */
  providerConfigKey: string;
  /** The connection whose credentials are injected (`Connection-Id`). */
  connectionId: string;
  /** `proxy()` only; default `GET`. */
  method?: ProxyMethod | Lowercase<ProxyMethod> | undefined;
  /**
   * Headers for the provider. Each is sent as `service-proxy-<name>`, so that it reaches the
   * provider as `<name>` and never replaces one of ours (the `Authorization` carrying the API key
   * in particular): your own `Authorization` or `Cookie` for the provider goes too. Credentials
   * the provider's auth mode injects win over a header of the same name, whatever its case (an
   * OAuth 2 or BASIC connection's `Authorization` is never replaced nor doubled); hop-by-hop,
   * `Host`, `Content-Length` and forwarding headers (`X-Forwarded-*`, `Forwarded`, `Via`,
   * `X-Real-IP`…) are never passed on.
   */
  headers?: Record<string, string | number | undefined> | undefined;
  /** Query parameters, added to any query already in `endpoint`. */
  params?: ProxyParams | undefined;
  /**
   * The body. Strings, Buffers, Uint8Arrays and ArrayBuffers are sent as they are; a Readable is
   * streamed; URLSearchParams go as a form; anything else is sent as JSON, with
   * `content-type: application/json` unless `headers` names a content type. Not allowed with GET or HEAD.
   */
  data?: unknown;
  /** How many times the proxy retries on 5xx, 429, network errors and `retryOn` codes (error statuses, 400 to 599), with back-off (`Retries`, 0-10). Default 0. */
  retries?: number | undefined;
  /** Status codes retried on top of 5xx and 429 (`Retry-On`). */
  retryOn?: readonly number[] | undefined;
  /** The provider API's base URL, when the provider has none or it must be overridden (`Base-Url-Override`). */
  baseUrlOverride?: string | undefined;
  /** `true` has the proxy decode a compressed response; default (false, or the provider's setting) passes it as it came (`Decompress`). */
  decompress?: boolean | undefined;
  /**
   * How `data` is read. Default: parsed JSON when the content type is JSON, else text. `json`
   * parses whatever the content type (text when it is not JSON); `text` and `document` give
   * text; `arraybuffer` the bytes exactly as received; `blob` a Blob of them; `stream` a
   * Readable of them, without buffering. Text and JSON are decoded from gzip, deflate or br when
   * the response is still content-encoded; `arraybuffer`, `blob` and `stream` never are.
   */
  responseType?: ProxyResponseType | undefined;
  /**
   * How long the call waits for the answer, in milliseconds (with `responseType: 'stream'`, for
   * its headers). Default: the client's `timeoutMs`, else 40 s × (`retries` + 1) + 10 s, past
   * the gateway's own deadline for the call with the server's default `PROXY_TIMEOUT_MS` (30 s).
   */
  timeoutMs?: number | undefined;
}

/** `proxy()`'s config without `method`, for `post`, `put`, `patch` and `delete`. */
export type ProxyMethodConfig = Omit<ProxyConfig, 'method'>;
/** `get()`'s config: no method, no body. */
export type ProxyGetConfig = Omit<ProxyConfig, 'method' | 'data'>;

/** What `data` is for a response type; `T` is the JSON's type (and the default's). */
export type ProxyResponseData<R extends ProxyResponseType, T> = R extends 'stream'
  ? Readable
  : R extends 'arraybuffer'
    ? ArrayBuffer
    : R extends 'blob'
      ? Blob
      : R extends 'text' | 'document'
        ? string
        : T;

/** The provider's answer, shaped like an axios response. */
export interface ProxyResponse<T = unknown> {
  status: number;
  statusText: string;
  /** Lower-case names; `set-cookie` is an array. */
  headers: IncomingHttpHeaders;
  data: T;
}

interface CallOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** This call's timeout, when it is not the client's. */
  timeoutMs?: number | undefined;
}

/** A call's own timeout (see `LatchkeyOptions.timeoutMs`). */
export interface TimeoutOption {
  /** How long this call waits for its answer, in milliseconds; over the client's `timeoutMs` and the call's default. */
  timeoutMs?: number | undefined;
}

/** How `triggerSync` starts each run: `full_refresh` clears the checkpoint; `full_refresh_and_clear_cache` the records too. */
export type SyncMode = 'incremental' | 'full_refresh' | 'full_refresh_and_clear_cache';

const MAX_RETRY_AFTER_S = 60;

/**
 * The Latchkey client. One instance per environment key; safe to share across requests.
 *
 * ```ts
 * const latchkey = new Latchkey({ host: 'https://latchkey.internal', apiKey: process.env.LATCHKEY_SECRET_KEY });
 * const variables = await latchkey.getEnvironmentVariables();
 * ```
 */
export class Latchkey {
  readonly host: string;
  private readonly http: Got;
  private readonly streamHttp: Got;
  private readonly rateLimitRetries: number;
  /** The client-wide timeout, when one was given: it replaces every call's default. */
  private readonly timeoutMs: number | undefined;
  private readonly webhookSecret: string;

  constructor(options: LatchkeyOptions) {
    const apiKey = options.apiKey ?? options.secretKey;
    if (!apiKey) throw new TypeError('Latchkey: apiKey is required');
    this.webhookSecret = options.webhookSigningKey ?? apiKey;
    this.host = (options.host ?? 'http://localhost:3003').replace(/\/+$/, '');
    this.rateLimitRetries = options.rateLimitRetries ?? 2;
    this.timeoutMs = options.timeoutMs;
    const defaults = {
      prefixUrl: this.host,
      headers: { authorization: `Bearer ${apiKey}`, 'user-agent': 'latchkey-node' },
      throwHttpErrors: false,
      retry: { limit: 0 },
    };
    this.http = got.extend({ ...defaults, responseType: 'text' });
    this.streamHttp = got.extend(defaults);
  }

  /**
   * Whether a webhook Latchkey sent you is genuine: its Standard Webhooks signature matches the
   * exact body (pass the raw text or bytes; a parsed object is serialized again, which matches
   * what Latchkey sends) and it is no older than 5 minutes. Never throws.
   */
  verifyIncomingWebhookRequest(body: string | Buffer | object, headers: Record<string, string | string[] | undefined> | Headers): boolean {
    const raw = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    return verifyWebhookSignature({ body: raw, headers, secret: this.webhookSecret });
  }

  /** A call's timeout: its own, else the client's, else the call's default. */
  private timeoutFor(own: number | undefined, byDefault: number): number {
    return own ?? this.timeoutMs ?? byDefault;
  }

  /** How a request that got no answer fails: a timeout (the call may still complete), or no connection at all. */
  private transportError(error: unknown, timeoutMs: number): LatchkeyError {
    if (error instanceof TimeoutError) {
      return new LatchkeyError({
        status: 0,
        code: 'timeout',
        message: `No answer from Latchkey at ${this.host} within ${timeoutMs} ms; the request may still complete on the server`,
      });
    }
    const code = error instanceof RequestError && error.code ? error.code : 'network_error';
    return new LatchkeyError({ status: 0, code, message: `Cannot reach Latchkey at ${this.host}: ${(error as Error).message}` });
  }

  // ---- actions and functions

  /**
   * Runs a deployed action for a connection and resolves with what it returned.
   * Scope `environment:actions:execute`. Waits 75 s by default, past the gateway's own wait for
   * the run (`FUNCTION_TIMEOUT_MS` + 10 s); a server with a longer `FUNCTION_TIMEOUT_MS` needs a
   * longer `timeoutMs`. A timeout (code `timeout`) does not mean the action did not run.
   */
  async triggerAction<T = unknown>(providerConfigKey: string, connectionId: string, actionName: string, input?: unknown, options: TimeoutOption = {}): Promise<T> {
    return this.call<T>('POST', 'action/trigger', {
      headers: { 'connection-id': connectionId, 'provider-config-key': providerConfigKey },
      body: { action_name: actionName, ...(input === undefined ? {} : { input }) },
      timeoutMs: this.timeoutFor(options.timeoutMs, ACTION_TIMEOUT_MS),
    });
  }

  /** Queues an action; its result is read with `getAsyncActionResult`. Scope `environment:actions:execute`. */
  async triggerActionAsync(providerConfigKey: string, connectionId: string, actionName: string, input?: unknown): Promise<AsyncActionHandle> {
    return this.call<AsyncActionHandle>('POST', 'action/trigger', {
      headers: { 'connection-id': connectionId, 'provider-config-key': providerConfigKey, 'x-async': 'true' },
      body: { action_name: actionName, ...(input === undefined ? {} : { input }) },
    });
  }

  /**
   * An async action's output, by id or statusUrl. While it is queued or running this rejects
   * with a LatchkeyError of code `action_pending` (status 202); a failed run rejects with the
   * code it failed with. Scope `environment:actions:execute`.
   */
  async getAsyncActionResult<T = unknown>(idOrStatusUrl: string | { id?: string; statusUrl?: string }): Promise<T> {
    const given = typeof idOrStatusUrl === 'string' ? idOrStatusUrl : (idOrStatusUrl.statusUrl ?? idOrStatusUrl.id ?? '');
    const id = given.replace(/^.*\/action\//, '').replace(/[?#].*$/, '');
    if (!id) throw new TypeError('Latchkey.getAsyncActionResult: an id or a statusUrl is required');
    const { status, body } = await this.send<T>('GET', `action/${encodeURIComponent(id)}`);
    if (status === 202) {
      const state = (body as { status?: string } | undefined)?.status ?? 'queued';
      throw new LatchkeyError({ status, code: 'action_pending', message: `The action is ${state}`, payload: { id, status: state } });
    }
    return body;
  }

  /** The deployed functions of every integration. Scope `environment:integrations:list_functions`. */
  async getScriptsConfig(): Promise<ScriptsConfigEntry[]> {
    return this.call<ScriptsConfigEntry[]>('GET', 'scripts/config');
  }

  /** The environment's variables. Scope `environment:variables:read`. */
  async getEnvironmentVariables(): Promise<EnvironmentVariable[]> {
    return this.call<EnvironmentVariable[]>('GET', 'environment-variables');
  }

  // ---- providers

  /** The provider catalog, optionally searched by name, display name or category. */
  async listProviders(options: { search?: string } = {}): Promise<{ data: Provider[] }> {
    return this.call('GET', 'providers', { query: { search: options.search } });
  }

  async getProvider(options: { provider: string }): Promise<{ data: Provider }> {
    return this.call('GET', `providers/${encodeURIComponent(options.provider)}`);
  }

  // ---- integrations

  /** Every integration of the environment, as `{configs}`. */
  async listIntegrations(): Promise<{ configs: IntegrationListItem[] }> {
    const { data } = await this.call<{ data: IntegrationListItem[] }>('GET', 'integrations');
    return { configs: data };
  }

  async getIntegration(options: { uniqueKey: string }, params: { include?: Array<'webhook' | 'credentials'> } = {}): Promise<{ data: Integration }> {
    return this.call('GET', `integrations/${encodeURIComponent(options.uniqueKey)}`, {
      query: { include: params.include?.length ? params.include.join(',') : undefined },
    });
  }

  async createIntegration(body: IntegrationInput & { provider: string; unique_key: string }): Promise<{ data: IntegrationListItem }> {
    return this.call('POST', 'integrations', { body });
  }

  /** Changes only the fields given; renaming is refused while the integration has connections. */
  async updateIntegration(options: { uniqueKey: string }, body: Partial<IntegrationInput> & { unique_key?: string; custom?: Record<string, string> }): Promise<{ data: IntegrationListItem }> {
    return this.call('PATCH', `integrations/${encodeURIComponent(options.uniqueKey)}`, { body });
  }

  async deleteIntegration(options: { uniqueKey: string }): Promise<{ success: boolean }> {
    return this.call('DELETE', `integrations/${encodeURIComponent(options.uniqueKey)}`);
  }

  // ---- connect sessions

  /** A 30-minute session for one end user's connect flow: `{data: {token, connect_link, expires_at}}`. */
  async createConnectSession(body: ConnectSessionInput = {}): Promise<{ data: ConnectSessionCreated }> {
    return this.call('POST', 'connect/sessions', { body });
  }

  /** A session that replaces the credentials of one connection made through a connect session. */
  async createReconnectSession(
    body: Omit<ConnectSessionInput, 'allowed_integrations' | 'overrides'> & { connection_id: string; integration_id: string },
  ): Promise<{ data: ConnectSessionCreated }> {
    return this.call('POST', 'connect/sessions/reconnect', { body });
  }

  /**
   * Waits for an end user's connection to appear in an integration: polls every 2 s, 30 times,
   * then rejects with `LatchkeyError` code `timeout`. The end user is matched on the
   * `end_user_id` tag, or the deprecated `end_user.id`.
   */
  async waitForConnection(integrationKey: string, userId: string, options: { intervalMs?: number; attempts?: number } = {}): Promise<ConnectionListItem> {
    const attempts = options.attempts ?? 30;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const byTag = await this.listConnections({ integrationId: integrationKey, tags: { end_user_id: userId } });
      const found = byTag.connections[0] ?? (await this.listConnections({ integrationId: integrationKey, userId })).connections[0];
      if (found) return found;
      if (attempt < attempts) await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 2000));
    }
    throw new LatchkeyError({ status: 0, code: 'timeout', message: `No connection for end user "${userId}" in "${integrationKey}" after ${attempts} attempts` });
  }

  // ---- connections

  /**
   * A connection in full; its token is refreshed first when it expires within 15 minutes.
   * Credentials are present only for a key with `connections:read_credentials`.
   * `refreshVendorAppJwtToken` renews the JWT of a vendor-app connection (a GitHub App's) first.
   */
  async getConnection(
    providerConfigKey: string,
    connectionId: string,
    forceRefresh = false,
    refreshToken = false,
    options: TimeoutOption & { refreshVendorAppJwtToken?: boolean } = {},
  ): Promise<Connection> {
    return this.call('GET', `connections/${encodeURIComponent(connectionId)}`, {
      query: {
        provider_config_key: providerConfigKey,
        force_refresh: forceRefresh || undefined,
        refresh_token: refreshToken || undefined,
        refresh_vendor_app_jwt_token: options.refreshVendorAppJwtToken || undefined,
      },
      timeoutMs: options.timeoutMs,
    });
  }

  /**
   * Imports a connection with credentials you already hold (`POST /connections`, scope
   * `connections:create`). Credentials come back only for a key with `connections:read_credentials`.
   */
  async createConnection(body: {
    provider_config_key: string;
    connection_id?: string;
    credentials: Record<string, unknown>;
    metadata?: Record<string, unknown>;
    connection_config?: Record<string, unknown>;
    tags?: Record<string, string>;
    end_user?: Record<string, unknown>;
  }): Promise<Connection> {
    return this.call('POST', 'connections', { body });
  }

  async listConnections(
    filters: { connectionId?: string; integrationId?: string | string[]; tags?: Record<string, string>; search?: string; limit?: number; page?: number; /** @deprecated use tags */ userId?: string } = {},
  ): Promise<{ connections: ConnectionListItem[] }> {
    const query: Query = {
      connectionId: filters.connectionId,
      integrationId: Array.isArray(filters.integrationId) ? filters.integrationId.join(',') : filters.integrationId,
      endUserId: filters.userId,
      search: filters.search,
      limit: filters.limit,
      page: filters.page,
    };
    for (const [key, value] of Object.entries(filters.tags ?? {})) query[`tags[${key}]`] = value;
    return this.call('GET', 'connections', { query });
  }

  async patchConnection(
    options: { connectionId: string; provider_config_key: string },
    body: { tags?: Record<string, string>; /** @deprecated use tags */ end_user?: Record<string, unknown> },
  ): Promise<{ success: boolean }> {
    return this.call('PATCH', `connections/${encodeURIComponent(options.connectionId)}`, {
      query: { provider_config_key: options.provider_config_key },
      body,
    });
  }

  async deleteConnection(providerConfigKey: string, connectionId: string): Promise<void> {
    await this.call('DELETE', `connections/${encodeURIComponent(connectionId)}`, { query: { provider_config_key: providerConfigKey } });
  }

  /** A connection's metadata (read by fetching the connection). */
  async getMetadata<T extends Record<string, unknown> = Record<string, unknown>>(providerConfigKey: string, connectionId: string): Promise<T> {
    const connection = await this.call<Connection>('GET', `connections/${encodeURIComponent(connectionId)}`, {
      query: { provider_config_key: providerConfigKey },
    });
    return connection.metadata as T;
  }

  /** Replaces the metadata of one or several connections. */
  async setMetadata(providerConfigKey: string, connectionId: string | string[], metadata: Record<string, unknown>): Promise<MetadataResult> {
    return this.call('POST', 'connections/metadata', { body: { connection_id: connectionId, provider_config_key: providerConfigKey, metadata } });
  }

  /** Sets only the given metadata properties of one or several connections. */
  async updateMetadata(providerConfigKey: string, connectionId: string | string[], metadata: Record<string, unknown>): Promise<MetadataResult> {
    return this.call('PATCH', 'connections/metadata', { body: { connection_id: connectionId, provider_config_key: providerConfigKey, metadata } });
  }

  // ---- records

  /**
   * A page of a connection's synced records of one model, in the order they last changed;
   * `next_cursor` is null on the last page. Paging never skips or repeats a record, even while
   * a sync writes: a record changed meanwhile comes again later, in its new state.
   */
  async listRecords<T extends Record<string, unknown> = Record<string, unknown>>(
    options: ListRecordsOptions,
  ): Promise<{ records: Array<SyncedRecord<T>>; next_cursor: string | null }> {
    return this.call('GET', 'records', {
      headers: { 'connection-id': options.connectionId, 'provider-config-key': options.providerConfigKey },
      query: {
        model: options.model,
        variant: options.variant,
        modified_after: options.modifiedAfter,
        filter: Array.isArray(options.filter) ? options.filter.join(',') : options.filter,
        limit: options.limit,
        cursor: options.cursor ?? undefined,
        ids: options.ids?.join(','),
      },
    });
  }

  /** Drops the payloads of records up to `untilCursor` (ids and `_metadata` stay); repeat while `has_more`. */
  async pruneRecords(options: {
    providerConfigKey: string;
    connectionId: string;
    model: string;
    untilCursor: string;
    variant?: string;
    limit?: number;
  }): Promise<{ count: number; has_more: boolean }> {
    return this.call('PATCH', 'records/prune', {
      headers: { 'connection-id': options.connectionId, 'provider-config-key': options.providerConfigKey },
      body: {
        model: options.model,
        until_cursor: options.untilCursor,
        ...(options.variant === undefined ? {} : { variant: options.variant }),
        ...(options.limit === undefined ? {} : { limit: options.limit }),
      },
    });
  }

  // ---- operations log

  /** A page of the environment's operations, newest first; `next_cursor` is null on the last page. */
  async listOperations(options: ListOperationsOptions = {}): Promise<{ operations: Operation[]; next_cursor: string | null }> {
    return this.call('GET', 'operations', {
      query: {
        type: Array.isArray(options.type) ? options.type.join(',') : (options.type as string | undefined),
        status: options.status,
        integration_id: options.integrationId,
        connection_id: options.connectionId,
        from: options.from,
        to: options.to,
        limit: options.limit,
        cursor: options.cursor ?? undefined,
      },
    });
  }

  /** One operation of the environment. */
  async getOperation(id: string): Promise<Operation> {
    return this.call('GET', `operations/${encodeURIComponent(id)}`);
  }

  // ---- syncs

  /** Resumes the schedules of the named syncs (all when empty) for one connection or all of the integration's. */
  async startSync(providerConfigKey: string, syncs: string[], connectionId?: string): Promise<{ success: boolean }> {
    return this.call('POST', 'sync/start', { body: { provider_config_key: providerConfigKey, syncs, ...(connectionId === undefined ? {} : { connection_id: connectionId }) } });
  }

  /** Pauses the schedules of the named syncs (all when empty): no runs until started again. */
  async pauseSync(providerConfigKey: string, syncs: string[], connectionId?: string): Promise<{ success: boolean }> {
    return this.call('POST', 'sync/pause', { body: { provider_config_key: providerConfigKey, syncs, ...(connectionId === undefined ? {} : { connection_id: connectionId }) } });
  }

  /**
   * One run now of each named sync (all when empty), unless one is running; `fullResync`
   * clears the sync's records and checkpoint first. `syncMode` says the same and more:
   * `full_refresh` clears the checkpoint only (the run reads everything again and keeps the
   * records), `full_refresh_and_clear_cache` is `fullResync`, `incremental` (the default) goes on
   * from the checkpoint. `syncVariant` runs that variant instead of the base.
   */
  async triggerSync(
    providerConfigKey: string,
    syncs: string[],
    connectionId?: string,
    options: TimeoutOption & { fullResync?: boolean; syncMode?: SyncMode; syncVariant?: string } = {},
  ): Promise<{ success: boolean }> {
    return this.call('POST', 'sync/trigger', {
      body: {
        provider_config_key: providerConfigKey,
        syncs,
        ...(connectionId === undefined ? {} : { connection_id: connectionId }),
        ...(options.fullResync === undefined ? {} : { full_resync: options.fullResync }),
        ...(options.syncMode === undefined ? {} : { sync_mode: options.syncMode }),
        ...(options.syncVariant === undefined ? {} : { sync_variant: options.syncVariant }),
      },
      timeoutMs: options.timeoutMs,
    });
  }

  /** Status of the named syncs (`'*'` or an empty list: all) for one connection or all. */
  async syncStatus(providerConfigKey: string, syncs: string[] | '*', connectionId?: string): Promise<{ syncs: SyncStatus[] }> {
    const names = syncs === '*' || syncs.length === 0 ? '*' : syncs.join(',');
    return this.call('GET', 'sync/status', { query: { provider_config_key: providerConfigKey, syncs: names, connection_id: connectionId } });
  }

  /** One connection's own frequency for a sync (`every hour`, `30m`, …); `null` reverts to the deployment's. */
  async updateSyncConnectionFrequency(providerConfigKey: string, sync: SyncRef, connectionId: string, frequency: string | null): Promise<{ frequency: string }> {
    const { name, variant } = typeof sync === 'string' ? { name: sync, variant: undefined } : sync;
    return this.call('PUT', 'sync/update-connection-frequency', {
      body: { provider_config_key: providerConfigKey, connection_id: connectionId, sync_name: name, ...(variant === undefined ? {} : { sync_variant: variant }), frequency },
    });
  }

  /** A variant of a sync for one connection: its own schedule, state and records (read with `variant`). */
  async createSyncVariant(options: { provider_config_key: string; connection_id: string; name: string; variant: string }): Promise<{ id: string; name: string; variant: string }> {
    return this.call('POST', `sync/${encodeURIComponent(options.name)}/variant/${encodeURIComponent(options.variant)}`, {
      body: { provider_config_key: options.provider_config_key, connection_id: options.connection_id },
    });
  }

  /** Deletes a variant with its schedule and records; `base` cannot be deleted. */
  async deleteSyncVariant(options: { provider_config_key: string; connection_id: string; name: string; variant: string }): Promise<{ success: boolean }> {
    return this.call('DELETE', `sync/${encodeURIComponent(options.name)}/variant/${encodeURIComponent(options.variant)}`, {
      body: { provider_config_key: options.provider_config_key, connection_id: options.connection_id },
    });
  }

  // ---- proxy

  /**
   * Calls the provider's API through `/proxy/{endpoint}` (scope `environment:proxy`) with the
   * connection's credentials injected, and resolves with the provider's answer.
   *
   * Errors: the proxy returns the provider's status unchanged, so a status of 400 or more rejects
   * with a LatchkeyError, and which side answered is told apart like this. An answer with the
   * `Latchkey-Error` header is the gateway's own error (`invalid_headers`/`upstream_not_allowed`
   * 400, `unknown_api_key` 401, `forbidden` 403, `unknown_connection` 404, `too_many_requests`
   * 429, `upstream_unreachable` 502, `service_unavailable` 503, `upstream_timeout` 504, …), read
   * as every other call reads it (code, message, errors, payload; the header's code when there is
   * no body, as for HEAD). The gateway drops that header from providers' answers, so anything
   * else is the provider's, whatever its body: code `provider_error`, `status` the provider's,
   * `payload: { status, headers, data }` with `data` parsed as JSON when it is JSON, else text,
   * and `retryAfter` from its `Retry-After`. Any status below 400 resolves; the SDK follows no
   * redirect (the proxy follows the provider's, so a 3xx reaching the SDK is the provider's final
   * answer). A network failure rejects with status 0, and no answer within `timeoutMs` with code
   * `timeout` (the provider may still have been called).
   *
   * Our own 429 is waited out and replayed like any other call's (`rateLimitRetries`), unless
   * `data` is a stream; a provider's 429 never is (`retries` asks the proxy to retry it).
   * `timeoutMs` bounds the whole call, or with `responseType: 'stream'` only the wait for the
   * response's headers.
   *
   * ```ts
   * const { data } = await latchkey.get<{ id: string }>({ endpoint: '/v1/me', providerConfigKey: 'github', connectionId: 'u-1' });
   * ```
   */
  async proxy<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    const method = (config.method ?? 'GET').toUpperCase();
    if (!PROXY_METHODS.has(method)) throw new TypeError(`Latchkey.proxy: method ${config.method} is not proxied`);
    return (await this.sendProxy(method as ProxyMethod, config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  /** `proxy()` with GET. */
  async get<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyGetConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    return (await this.sendProxy('GET', config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  /** `proxy()` with POST. */
  async post<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyMethodConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    return (await this.sendProxy('POST', config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  /** `proxy()` with PUT. */
  async put<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyMethodConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    return (await this.sendProxy('PUT', config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  /** `proxy()` with PATCH. */
  async patch<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyMethodConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    return (await this.sendProxy('PATCH', config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  /** `proxy()` with DELETE. */
  async delete<T = unknown, R extends ProxyResponseType = 'json'>(config: ProxyMethodConfig & { responseType?: R | undefined }): Promise<ProxyResponse<ProxyResponseData<R, T>>> {
    return (await this.sendProxy('DELETE', config)) as ProxyResponse<ProxyResponseData<R, T>>;
  }

  private async sendProxy(method: ProxyMethod, config: ProxyConfig): Promise<ProxyResponse> {
    const { url, headers, body } = proxyRequestParts(method, config);
    const replayable = !(body instanceof Readable);
    const stream = config.responseType === 'stream';
    const timeoutMs = this.timeoutFor(config.timeoutMs, proxyTimeoutMs(config.retries ?? 0));
    for (let attempt = 0; ; attempt++) {
      let received: { status: number; statusText: string; headers: IncomingHttpHeaders; body: Buffer | Readable };
      try {
        received = stream ? await this.proxyStream(method, url, headers, body, timeoutMs) : await this.proxyBuffered(method, url, headers, body, timeoutMs);
      } catch (error) {
        throw this.transportError(error, timeoutMs);
      }
      const responseHeaders = plainHeaders(received.headers);
      if (received.status < 400) {
        const data = received.body instanceof Readable ? received.body : readProxyBody(received.body, responseHeaders, config.responseType);
        return { status: received.status, statusText: received.statusText, headers: responseHeaders, data };
      }
      const raw = received.body instanceof Readable ? await drain(received.body) : received.body;
      const error = proxyError(received.status, received.statusText, responseHeaders, raw);
      if (
        error.code === 'too_many_requests' &&
        replayable &&
        attempt < this.rateLimitRetries &&
        error.retryAfter !== undefined &&
        error.retryAfter <= MAX_RETRY_AFTER_S
      ) {
        await new Promise((resolve) => setTimeout(resolve, error.retryAfter! * 1000));
        continue;
      }
      throw error;
    }
  }

  private async proxyBuffered(method: ProxyMethod, url: string, headers: Record<string, string | undefined>, body: ProxyBody, timeoutMs: number) {
    const response = await this.http(url, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      timeout: { request: timeoutMs },
      responseType: 'buffer',
      decompress: false,
      followRedirect: false,
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
    return { status: response.statusCode, statusText: response.statusMessage ?? '', headers: response.headers, body: response.body };
  }

  /** Resolves once the response's headers are in; the body stays unread in the returned stream. */
  private proxyStream(method: ProxyMethod, url: string, headers: Record<string, string | undefined>, body: ProxyBody, timeoutMs: number) {
    const request = this.streamHttp.stream(url, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      // A proxied download may stream for longer than any one call should take: only its headers are timed.
      timeout: { response: timeoutMs },
      decompress: false,
      followRedirect: false,
      throwHttpErrors: false,
      retry: { limit: 0 },
    });
    // got waits for writes to a body-carrying stream request that was given no body.
    if (body === undefined && method !== 'GET' && method !== 'HEAD') request.end();
    return new Promise<{ status: number; statusText: string; headers: IncomingHttpHeaders; body: Readable }>((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      request.once('error', onError);
      request.once('response', (response: { statusCode: number; statusMessage?: string; headers: IncomingHttpHeaders }) => {
        request.off('error', onError);
        resolve({ status: response.statusCode, statusText: response.statusMessage ?? '', headers: response.headers, body: request });
      });
    });
  }

  /** Sends one request to the API; resolves with the parsed JSON body or rejects with LatchkeyError. */
  protected async call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, options: CallOptions = {}): Promise<T> {
    return (await this.send<T>(method, path, options)).body;
  }

  /** As `call`, with the success status (202 and 200 mean different things to some routes). */
  protected async send<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, options: CallOptions = {}): Promise<{ status: number; body: T }> {
    const searchParams = Object.fromEntries(
      Object.entries(options.query ?? {}).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined),
    );
    const timeoutMs = this.timeoutFor(options.timeoutMs, CALL_TIMEOUT_MS);
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.http(path.replace(/^\//, ''), {
          method,
          searchParams,
          timeout: { request: timeoutMs },
          ...(options.headers ? { headers: options.headers } : {}),
          ...(options.body === undefined ? {} : { json: options.body }),
        });
      } catch (error) {
        throw this.transportError(error, timeoutMs);
      }
      const body: unknown = response.body ? safeJson(response.body) : undefined;
      if (response.statusCode < 400) return { status: response.statusCode, body: body as T };
      const error = errorFromResponse(response.statusCode, body, response.headers['retry-after']);
      if (response.statusCode === 429 && attempt < this.rateLimitRetries && error.retryAfter !== undefined && error.retryAfter <= MAX_RETRY_AFTER_S) {
        await new Promise((resolve) => setTimeout(resolve, error.retryAfter! * 1000));
        continue;
      }
      throw error;
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ---- proxy helpers

const PROXY_METHODS = new Set<string>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const FORWARD_PREFIX = 'service-proxy-';
/** The gateway's mark on its own error answers (lower case, as node gives header names); its value is the code. */
const OWN_ERROR_HEADER = 'latchkey-error';
/** An error body bigger than this is cut short: an error is not a download. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

type ProxyBody = string | Uint8Array | Readable | undefined;

/** The gateway URL (relative to the host), our configuration headers and the caller's, and the body. */
function proxyRequestParts(method: ProxyMethod, config: ProxyConfig): { url: string; headers: Record<string, string | undefined>; body: ProxyBody } {
  for (const name of ['endpoint', 'providerConfigKey', 'connectionId'] as const) {
    if (typeof config[name] !== 'string' || config[name] === '') throw new TypeError(`Latchkey.proxy: ${name} is required`);
  }
  const endpoint = config.endpoint.replace(/^[/\\]+/, '');
  const queryAt = endpoint.indexOf('?');
  const path = queryAt < 0 ? endpoint : endpoint.slice(0, queryAt);
  // A dot segment would climb out of /proxy/ to another route of the gateway.
  if (path.split(/[/\\]/).some((segment) => /^(?:\.|%2e){1,2}$/i.test(segment))) {
    throw new TypeError(`Latchkey.proxy: endpoint ${config.endpoint} has a "." or ".." segment`);
  }
  const query = [queryAt < 0 ? '' : endpoint.slice(queryAt + 1), queryString(config.params)].filter(Boolean).join('&');

  const headers: Record<string, string | undefined> = {
    'connection-id': config.connectionId,
    'provider-config-key': config.providerConfigKey,
    retries: String(config.retries ?? 0),
  };
  if (config.retryOn?.length) headers['retry-on'] = config.retryOn.join(',');
  if (config.baseUrlOverride !== undefined) headers['base-url-override'] = config.baseUrlOverride;
  if (config.decompress !== undefined) headers['decompress'] = String(config.decompress);
  const callerNames = new Set<string>();
  for (const [name, value] of Object.entries(config.headers ?? {})) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    const forwarded = lower.startsWith(FORWARD_PREFIX) ? lower : `${FORWARD_PREFIX}${lower}`;
    callerNames.add(forwarded.slice(FORWARD_PREFIX.length));
    headers[forwarded] = String(value);
  }
  // The gateway forwards these unprefixed too: the caller's own must be the only one.
  if (callerNames.has('user-agent')) headers['user-agent'] = undefined;

  let body: ProxyBody;
  const data = config.data;
  if (data !== undefined && data !== null) {
    if (method === 'GET' || method === 'HEAD') throw new TypeError(`Latchkey.proxy: a ${method} request has no body`);
    let contentType: string | undefined;
    if (typeof data === 'string' || data instanceof Uint8Array || data instanceof Readable) body = data;
    else if (data instanceof ArrayBuffer) body = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) body = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else if (data instanceof URLSearchParams) {
      body = data.toString();
      contentType = 'application/x-www-form-urlencoded;charset=utf-8';
    } else {
      body = JSON.stringify(data);
      contentType = 'application/json';
    }
    if (contentType && !callerNames.has('content-type')) headers['content-type'] = contentType;
  }
  return { url: `proxy/${path}${query ? `?${query}` : ''}`, headers, body };
}

function queryString(params: ProxyParams | undefined): string {
  if (params === undefined) return '';
  if (typeof params === 'string') return params.replace(/^\?/, '');
  if (params instanceof URLSearchParams) return params.toString();
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) search.append(name, String(item));
  }
  return search.toString();
}

function plainHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const plain: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) plain[name.toLowerCase()] = value;
  return plain;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A successful body, read as the response type asks. */
function readProxyBody(body: Buffer, headers: IncomingHttpHeaders, responseType: ProxyResponseType | undefined): unknown {
  switch (responseType) {
    case 'arraybuffer': {
      const copy = new ArrayBuffer(body.length);
      new Uint8Array(copy).set(body);
      return copy;
    }
    case 'blob':
      return new Blob([body], { type: header(headers, 'content-type') ?? '' });
    case 'text':
    case 'document':
      return text(decoded(body, headers), headers);
    case 'json': {
      const content = text(decoded(body, headers), headers);
      return content === '' ? content : safeJson(content);
    }
    default:
      return autoBody(body, headers);
  }
}

/** JSON when the content type says so (and it parses), else text. */
function autoBody(body: Buffer, headers: IncomingHttpHeaders): unknown {
  const content = text(decoded(body, headers), headers);
  return content !== '' && /^(?:application\/(?:[\w.+-]+\+)?json|text\/json)\b/i.test(header(headers, 'content-type') ?? '') ? safeJson(content) : content;
}

/** Undoes a content encoding the proxy passed through (only to read the body as text). */
function decoded(body: Buffer, headers: IncomingHttpHeaders): Buffer {
  const encodings = (header(headers, 'content-encoding') ?? '').split(',').map((item) => item.trim().toLowerCase()).filter((item) => item && item !== 'identity');
  try {
    let result = body;
    for (const encoding of encodings.reverse()) {
      if (encoding === 'gzip' || encoding === 'x-gzip') result = gunzipSync(result);
      else if (encoding === 'br') result = brotliDecompressSync(result);
      else if (encoding === 'deflate') {
        try {
          result = inflateSync(result);
        } catch {
          result = inflateRawSync(result);
        }
      } else return body;
    }
    return result;
  } catch {
    return body;
  }
}

function text(body: Buffer, headers: IncomingHttpHeaders): string {
  const charset = /;\s*charset="?([\w.:-]+)/i.exec(header(headers, 'content-type') ?? '')?.[1];
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(body);
  } catch {
    return body.toString('utf8');
  }
}

async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= MAX_ERROR_BODY_BYTES) {
      stream.destroy();
      break;
    }
  }
  return Buffer.concat(chunks);
}

/**
 * Ours when the gateway marked it with `Latchkey-Error` (it drops that header from providers'
 * answers); else the provider's, whatever the body says: a provider's API may well answer
 * `{"error": {"code": "not_found"}}` itself.
 */
function proxyError(status: number, statusText: string, headers: IncomingHttpHeaders, body: Buffer): LatchkeyError {
  const data = autoBody(body, headers);
  const retryAfterHeader = header(headers, 'retry-after');
  const ownCode = header(headers, OWN_ERROR_HEADER);
  if (ownCode !== undefined) {
    // A HEAD answer has no body: the header's code is all there is.
    const error = errorFromResponse(status, typeof data === 'object' ? data : undefined, retryAfterHeader);
    return error.code === 'unknown_error' && ownCode !== ''
      ? new LatchkeyError({ status, code: ownCode, message: `Latchkey answered HTTP ${status} (${ownCode})`, retryAfter: error.retryAfter })
      : error;
  }
  const retryAfter = retryAfterHeader === undefined ? undefined : Number(retryAfterHeader);
  return new LatchkeyError({
    status,
    code: 'provider_error',
    message: `The provider answered HTTP ${status}${statusText ? ` ${statusText}` : ''}`,
    payload: { status, headers, data },
    retryAfter: retryAfter !== undefined && Number.isFinite(retryAfter) ? retryAfter : undefined,
  });
}
