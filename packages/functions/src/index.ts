/**
 * The functions SDK: what customers import to write the code Latchkey runs for them. It has no
 * dependencies and no I/O of its own: every capability arrives through the context, which the
 * action-runner builds inside the sandbox. `latchkey deploy` bundles each file with esbuild.
 */

/** Any schema with the Standard Schema interface (zod ≥ 3.24, valibot, arktype…). */
export interface Schema<T = unknown> {
  readonly '~standard': {
    readonly validate: (value: unknown) => StandardResult<T> | Promise<StandardResult<T>>;
  };
}
interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}
type StandardResult<T> = { readonly value: T; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

type Infer<S, Fallback> = S extends Schema<infer T> ? T : Fallback;

/** A model of a sync: a zod object schema, or a plain map of field name to type name. */
export type Model = Record<string, string> | { readonly shape: Record<string, unknown> };

export type ProxyMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

export interface ProxyConfig {
  /** Path on the provider's API (its base URL comes from the catalog or `baseUrlOverride`). */
  endpoint: string;
  method?: ProxyMethod;
  headers?: Record<string, string>;
  params?: Record<string, string | number>;
  /** Sent as JSON unless it is a string. */
  data?: unknown;
  retries?: number;
  retryOn?: number[];
  baseUrlOverride?: string;
  decompress?: boolean;
  /** How to read the answer: parsed JSON (default, text when it is not JSON), or text. */
  responseType?: 'json' | 'text';
}

export interface ProxyResponse<T = unknown> {
  status: number;
  headers: Record<string, string>;
  data: T;
}

/** Overrides of the provider's `proxy.paginate` settings for one call. */
export interface PaginateConfig {
  type?: 'cursor' | 'link' | 'offset';
  /** Where the records are in each answer (dot path); the body itself when absent. */
  response_path?: string;
  limit_name_in_request?: string;
  limit?: number;
  cursor_path_in_response?: string;
  cursor_name_in_request?: string;
  /** `link`: a dot path to the next URL in the body; else the `Link` header's link with this rel (default `next`). */
  link_path_in_response_body?: string;
  link_rel_in_response_header?: string;
  offset_name_in_request?: string;
}

export interface ConnectionInfo {
  id: number;
  connection_id: string;
  provider_config_key: string;
  provider: string;
  metadata: Record<string, unknown>;
  connection_config: Record<string, unknown>;
  tags: Record<string, string>;
  credentials?: Record<string, unknown>;
}

export interface IntegrationInfo {
  unique_key: string;
  provider: string;
  /** Where the provider should send webhooks for this integration. */
  webhook_url?: string;
  /** The integration's shared webhook secret (absent for a dry run without `integrations:read_credentials`). */
  webhookSecret?: string;
}

/** What every function gets: the connection it runs for and the ways out of the sandbox. */
export interface FunctionContext {
  readonly connectionId: string;
  readonly providerConfigKey: string;
  /** True in a dry run: writes to Latchkey are reported instead of applied. */
  readonly dryRun: boolean;
  proxy<T = unknown>(config: ProxyConfig): Promise<ProxyResponse<T>>;
  get<T = unknown>(config: Omit<ProxyConfig, 'method'>): Promise<ProxyResponse<T>>;
  post<T = unknown>(config: Omit<ProxyConfig, 'method'>): Promise<ProxyResponse<T>>;
  put<T = unknown>(config: Omit<ProxyConfig, 'method'>): Promise<ProxyResponse<T>>;
  patch<T = unknown>(config: Omit<ProxyConfig, 'method'>): Promise<ProxyResponse<T>>;
  delete<T = unknown>(config: Omit<ProxyConfig, 'method'>): Promise<ProxyResponse<T>>;
  /**
   * Every page of a list endpoint, driven by the provider's `proxy.paginate` settings. A page is
   * records (JSON objects) unless `T` says otherwise, so it goes to `batchSave` as it is.
   */
  paginate<T = Record<string, unknown>>(config: ProxyConfig & { paginate?: PaginateConfig }): AsyncGenerator<T[], void, undefined>;
  /** The connection, with its credentials. */
  getConnection(): Promise<ConnectionInfo>;
  /**
   * The integration, with its webhook URL and secret. The secret is left out, as by
   * `GET /integrations/{key}?include=webhook`, in a dry run whose API key lacks
   * `integrations:read_credentials`; deployed functions always get it.
   */
  getIntegration(): Promise<IntegrationInfo>;
  getMetadata<T extends Record<string, unknown> = Record<string, unknown>>(): Promise<T>;
  /** Replaces the connection's metadata. */
  setMetadata(metadata: Record<string, unknown>): Promise<void>;
  /** Shallow-merges into the connection's metadata. */
  updateMetadata(metadata: Record<string, unknown>): Promise<void>;
  getEnvironmentVariables(): Promise<Array<{ name: string; value: string }>>;
  log(message: string, fields?: Record<string, unknown>): void;
  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>): void;
}

export interface SyncContext extends FunctionContext {
  /**
   * The variant this run is for: `base` for the sync's own schedule, else the name given to
   * `POST /sync/{name}/variant/{variant}`. Each variant keeps its own records, so a sync can read
   * a different slice of the provider per variant (a region, an account, a filter).
   */
  readonly variant: string;
  /** Records for a model (stored with the records work; a dry run lists them in its output). */
  batchSave(records: Array<Record<string, unknown>>, model: string): Promise<void>;
  batchUpdate(records: Array<Record<string, unknown>>, model: string): Promise<void>;
  batchDelete(records: Array<Record<string, unknown>>, model: string): Promise<void>;
  /**
   * The checkpoint saved last for this sync, connection and variant, or null. It outlives the
   * run: the next run (or the same run, retried after its worker died) starts with it. A full
   * resync (`POST /sync/trigger` with `full_resync`) starts with none.
   */
  getCheckpoint<T extends Record<string, unknown> = Record<string, unknown>>(): Promise<T | null>;
  /**
   * Saves where the sync got to (a cursor, a page, an `updated_since`): a JSON object of at most
   * 64 KB, replacing the previous one once this resolves. Save it after the records it covers
   * were written (`batchSave` resolved), so a resumed run skips nothing.
   */
  saveCheckpoint(checkpoint: Record<string, unknown>): Promise<void>;
  /** Forgets the checkpoint: the next run starts from the beginning (e.g. after a complete pass). */
  clearCheckpoint(): Promise<void>;
}

export interface ActionDefinition<I = unknown, O = unknown> {
  readonly kind: 'action';
  readonly name: string;
  readonly description?: string;
  readonly input?: Schema<I>;
  readonly output?: Schema<O>;
  readonly exec: (ctx: FunctionContext, input: I) => Promise<O> | O;
}

export interface SyncDefinition {
  readonly kind: 'sync';
  readonly name: string;
  readonly description?: string;
  /** A duration phrase: `every hour`, `every 5 minutes`, `1d`. */
  readonly frequency: string;
  readonly models: Record<string, Model>;
  /** Provider webhook types that `onWebhook` handles. */
  readonly webhookSubscriptions?: readonly string[];
  readonly exec: (ctx: SyncContext) => Promise<void> | void;
  readonly onWebhook?: (ctx: SyncContext, payload: unknown) => Promise<void> | void;
}

export type LifecycleEvent = 'post-connection-creation' | 'pre-connection-deletion';

export interface OnEventDefinition {
  readonly kind: 'on-event';
  readonly name: string;
  readonly event: LifecycleEvent;
  readonly exec: (ctx: FunctionContext) => Promise<void> | void;
}

export type FunctionDefinition = ActionDefinition<any, any> | SyncDefinition | OnEventDefinition;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/;

function checkName(name: unknown): void {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new Error(`function name "${String(name)}": letters, digits, _ and -, up to 100, starting with a letter or digit`);
  }
}

/** An action: called with an input, answers with an output (`POST /action/trigger`). */
export function defineAction<IS extends Schema | undefined = undefined, O = unknown>(definition: {
  name: string;
  description?: string;
  input?: IS;
  output?: Schema<O>;
  exec: (ctx: FunctionContext, input: Infer<IS, unknown>) => Promise<O> | O;
}): ActionDefinition<Infer<IS, unknown>, O> {
  checkName(definition.name);
  return { kind: 'action', ...definition } as ActionDefinition<Infer<IS, unknown>, O>;
}

/** A sync: runs on a schedule and saves records of its models; `onWebhook` for provider webhooks. */
export function defineSync(definition: Omit<SyncDefinition, 'kind'>): SyncDefinition {
  checkName(definition.name);
  if (typeof definition.frequency !== 'string' || definition.frequency.trim() === '') throw new Error(`sync ${definition.name}: frequency is required`);
  if (!definition.models || Object.keys(definition.models).length === 0) throw new Error(`sync ${definition.name}: at least one model is required`);
  return { kind: 'sync', ...definition };
}

/** A connection lifecycle hook; named after its event unless `name` is given. */
export function defineOnEvent(definition: { name?: string; event: LifecycleEvent; exec: OnEventDefinition['exec'] }): OnEventDefinition {
  if (definition.event !== 'post-connection-creation' && definition.event !== 'pre-connection-deletion') {
    throw new Error(`unknown event "${String(definition.event)}"`);
  }
  const name = definition.name ?? definition.event;
  checkName(name);
  return { kind: 'on-event', name, event: definition.event, exec: definition.exec };
}

export interface ModelDescription {
  name: string;
  fields: Array<{ name: string; type: string }>;
}

/** What a deployment records of a function: everything but its code. */
export type FunctionDescription =
  | { type: 'action'; name: string; description?: string; has_input_schema: boolean; input_schema?: Record<string, unknown> }
  | { type: 'sync'; name: string; description?: string; frequency: string; models: ModelDescription[]; webhook_subscriptions: string[] }
  | { type: 'on-event'; name: string; event: LifecycleEvent };

/**
 * Field types of a zod object (read from its definition), or of a plain field map. Anything else
 * (another library's schema, which has no `shape`) is refused: read as a field map, its own
 * properties would become fields that every record then lacks.
 */
function describeModel(sync: string, name: string, model: Model): ModelDescription {
  const value = model as unknown;
  const shape = (value as { shape?: unknown } | null)?.shape;
  if (shape !== null && typeof shape === 'object') {
    return { name, fields: Object.entries(shape).map(([field, schema]) => ({ name: field, type: zodTypeName(schema) })) };
  }
  const plainMap = value !== null && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every((type) => typeof type === 'string');
  if (!plainMap) {
    throw new Error(`sync ${sync}: model ${name} is neither a zod object (z.object(…)) nor a plain map of field name to type name ({ id: 'string' })`);
  }
  return { name, fields: Object.entries(value as Record<string, string>).map(([field, type]) => ({ name: field, type })) };
}

function zodTypeName(schema: unknown): string {
  let def = (schema as { def?: Record<string, unknown>; _def?: Record<string, unknown> } | undefined)?.def ?? (schema as { _def?: Record<string, unknown> })?._def;
  let optional = '';
  for (let depth = 0; def && depth < 5; depth++) {
    const type = String(def['type'] ?? def['typeName'] ?? 'unknown').replace(/^Zod/, '').toLowerCase();
    if ((type === 'optional' || type === 'nullable' || type === 'default') && def['innerType']) {
      if (type !== 'default') optional = type === 'optional' ? '?' : ' | null';
      const inner = def['innerType'] as { def?: Record<string, unknown>; _def?: Record<string, unknown> };
      def = inner.def ?? inner._def;
      continue;
    }
    return `${type}${optional}`;
  }
  return 'unknown';
}

/**
 * The JSON Schema of an action's input, where its schema library implements Standard JSON
 * Schema (zod 4.2+, ArkType, Valibot's adapter…); nothing otherwise, and MCP clients then see
 * a plain object.
 */
function inputJsonSchema(input: unknown): { input_schema?: Record<string, unknown> } {
  const standard = (input as { '~standard'?: { jsonSchema?: { input?: (options: { target: string }) => unknown } } } | undefined)?.['~standard'];
  if (typeof standard?.jsonSchema?.input !== 'function') return {};
  try {
    const schema = standard.jsonSchema.input({ target: 'draft-2020-12' });
    return schema !== null && typeof schema === 'object' && !Array.isArray(schema) ? { input_schema: schema as Record<string, unknown> } : {};
  } catch {
    // A schema that cannot be expressed in JSON Schema (a transform, a custom check) still runs.
    return {};
  }
}

/** Describes a definition (what `latchkey deploy` uploads beside the code). Throws on anything else. */
export function describeFunction(value: unknown): FunctionDescription {
  const definition = value as Partial<FunctionDefinition> | undefined;
  if (!definition || typeof definition !== 'object' || typeof definition.exec !== 'function') {
    throw new Error('the default export must be defineAction(…), defineSync(…) or defineOnEvent(…)');
  }
  checkName(definition.name);
  const optional = (description: unknown) => (typeof description === 'string' ? { description } : {});
  switch (definition.kind) {
    case 'action':
      return {
        type: 'action',
        name: definition.name!,
        ...optional(definition.description),
        has_input_schema: definition.input !== undefined,
        ...inputJsonSchema(definition.input),
      };
    case 'sync':
      return {
        type: 'sync',
        name: definition.name!,
        ...optional(definition.description),
        frequency: definition.frequency!,
        models: Object.entries(definition.models ?? {}).map(([name, model]) => describeModel(definition.name!, name, model)),
        webhook_subscriptions: [...(definition.webhookSubscriptions ?? [])],
      };
    case 'on-event':
      return { type: 'on-event', name: definition.name!, event: definition.event! };
    default:
      throw new Error('the default export must be defineAction(…), defineSync(…) or defineOnEvent(…)');
  }
}
