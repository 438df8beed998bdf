import got, { type Got, RequestError } from 'got';
import { LatchkeyError, errorFromResponse } from './errors.js';

export interface LatchkeyOptions {
  /** The gateway's base URL. Default `http://localhost:3003`. */
  host?: string;
  /** The environment's secret key. */
  apiKey?: string;
  /** @deprecated Use `apiKey`. */
  secretKey?: string;
  /** Per-request timeout. Default 30 s. */
  timeoutMs?: number;
  /** How many times a 429 is retried after waiting its `Retry-After`. Default 2; 0 turns it off. */
  rateLimitRetries?: number;
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

export interface IntegrationListItem {
  unique_key: string;
  provider: string;
  display_name?: string;
  logo: string;
  created_at: string;
  updated_at: string;
}

export interface Integration extends IntegrationListItem {
  forward_webhooks: boolean;
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

export interface MetadataResult {
  connection_id: string | string[];
  provider_config_key: string;
  metadata: Record<string, unknown>;
}

interface CallOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
}

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
  private readonly rateLimitRetries: number;

  constructor(options: LatchkeyOptions) {
    const apiKey = options.apiKey ?? options.secretKey;
    if (!apiKey) throw new TypeError('Latchkey: apiKey is required');
    this.host = (options.host ?? 'http://localhost:3003').replace(/\/+$/, '');
    this.rateLimitRetries = options.rateLimitRetries ?? 2;
    this.http = got.extend({
      prefixUrl: this.host,
      headers: { authorization: `Bearer ${apiKey}`, 'user-agent': 'latchkey-node' },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: options.timeoutMs ?? 30_000 },
      responseType: 'text',
    });
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

  // ---- connections

  /**
   * A connection in full; its token is refreshed first when it expires within 15 minutes.
   * Credentials are present only for a key with `connections:read_credentials`.
   */
  async getConnection(providerConfigKey: string, connectionId: string, forceRefresh = false, refreshToken = false): Promise<Connection> {
    return this.call('GET', `connections/${encodeURIComponent(connectionId)}`, {
      query: { provider_config_key: providerConfigKey, force_refresh: forceRefresh || undefined, refresh_token: refreshToken || undefined },
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

  /** Sends one request to the API; resolves with the parsed JSON body or rejects with LatchkeyError. */
  protected async call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, options: CallOptions = {}): Promise<T> {
    const searchParams = Object.fromEntries(
      Object.entries(options.query ?? {}).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined),
    );
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.http(path.replace(/^\//, ''), {
          method,
          searchParams,
          ...(options.headers ? { headers: options.headers } : {}),
          ...(options.body === undefined ? {} : { json: options.body }),
        });
      } catch (error) {
        const code = error instanceof RequestError && error.code ? error.code : 'network_error';
        throw new LatchkeyError({ status: 0, code, message: `Cannot reach Latchkey at ${this.host}: ${(error as Error).message}` });
      }
      const body: unknown = response.body ? safeJson(response.body) : undefined;
      if (response.statusCode < 400) return body as T;
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
