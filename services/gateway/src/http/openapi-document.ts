import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '@latchkey/errors';
import type { AnyRoute, BareRoute, RouteDoc } from './define-route.js';
import { querySchemaFor, readsNoBodyAsEmpty } from './validate.js';

/**
 * The API reference, built from the routes the gateway mounts: each route's access, scope and
 * input schemas come from its own declaration, and its `doc` adds what a declaration cannot say
 * (a summary, the answer, the errors of its own work). A route cannot be mounted without being
 * documented, and nothing is documented that is not mounted.
 */

type JsonSchema = Record<string, unknown>;
type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Access = AnyRoute['auth'];

interface Operation {
  method: Method;
  path: string;
  auth: Access;
  scope: AnyRoute['scope'];
  doc: RouteDoc;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  /** The route's errors carry `message` beside the envelope (`errorShape: 'message'`). */
  messageShape: boolean;
  /** Served before express: path, query and body are the route's own to read. */
  bare: boolean;
}

const TAGS: ReadonlyArray<{ name: string; description: string; prefixes: readonly string[] }> = [
  { name: 'Probes', description: 'Liveness and readiness, for orchestrators.', prefixes: ['health', 'ready'] },
  { name: 'Providers', description: 'The provider catalog and its logos.', prefixes: ['providers', 'logos'] },
  { name: 'Integrations', description: 'Your configuration of one provider in an environment.', prefixes: ['integrations'] },
  { name: 'Connections', description: "One end user's credentials for one integration.", prefixes: ['connections', 'connection'] },
  {
    name: 'Connect',
    description: 'Connect sessions, and the hosted Connect UI and flows an end user goes through with a session token.',
    prefixes: ['connect', 'auth', 'api-auth', 'oauth'],
  },
  { name: 'Proxy', description: "Calls to a provider's API with the connection's credentials injected.", prefixes: ['proxy'] },
  { name: 'Actions', description: 'Deployed actions, run synchronously or asynchronously.', prefixes: ['action'] },
  { name: 'Functions', description: 'Deploying, compiling and dry-running functions.', prefixes: ['functions', 'scripts'] },
  { name: 'Syncs', description: 'Sync schedules, runs and variants.', prefixes: ['sync'] },
  { name: 'Records', description: 'What syncs saved.', prefixes: ['records'] },
  { name: 'Operations', description: 'The operations log: proxy calls, runs, webhooks, connect steps, refreshes, deploys.', prefixes: ['operations'] },
  { name: 'Environment', description: "The environment's variables.", prefixes: ['environment-variables'] },
  { name: 'Webhooks', description: 'Provider webhooks, received for an integration.', prefixes: ['webhook'] },
  { name: 'MCP', description: "A connection's actions as Model Context Protocol tools.", prefixes: ['mcp'] },
  { name: 'Reference', description: 'This reference, as a document and as a page.', prefixes: ['openapi.json', 'docs'] },
  {
    name: 'Operator',
    description: 'The operator API: environments, webhook settings, API keys and key rotation, behind `ADMIN_TOKEN`.',
    prefixes: ['admin'],
  },
];

function tagOf(path: string): string {
  const first = path.split('/')[1] ?? '';
  const tag = TAGS.find((candidate) => candidate.prefixes.includes(first));
  if (!tag) throw new Error(`No API reference tag for ${path}: add its first segment to TAGS`);
  return tag.name;
}

/** Express's `:name` to OpenAPI's `{name}`. */
function templatePath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** A request is described as the route accepts it (`input`), an answer as it is sent (`output`). */
function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output' = 'input'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    cycles: 'ref',
    reused: 'inline',
  }) as JsonSchema;
  return rest;
}

function objectProperties(schema: z.ZodType): { properties: Record<string, JsonSchema>; required: Set<string> } {
  const json = jsonSchemaOf(schema);
  return {
    properties: (json['properties'] as Record<string, JsonSchema> | undefined) ?? {},
    required: new Set((json['required'] as string[] | undefined) ?? []),
  };
}

function parametersOf(operation: Operation): JsonSchema[] {
  const parameters: JsonSchema[] = [];
  const pathNames = [...operation.path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1] ?? '');
  const params = operation.params ? objectProperties(operation.params).properties : {};
  for (const name of pathNames) {
    parameters.push({ name, in: 'path', required: true, schema: params[name] ?? { type: 'string' } });
  }
  if (operation.query) {
    const { properties, required } = objectProperties(operation.query);
    for (const [name, schema] of Object.entries(properties)) {
      const nested = schema['type'] === 'object';
      parameters.push({
        name,
        in: 'query',
        required: required.has(name),
        schema,
        ...(nested ? { style: 'deepObject', explode: true } : {}),
      });
    }
  }
  for (const header of operation.doc.headers ?? []) {
    parameters.push({ name: header, in: 'header', required: true, schema: { type: 'string', minLength: 1 } });
  }
  return parameters;
}

/** The codes a route may answer besides its own: those of its access, its inputs and the system. */
function errorCodesOf(operation: Operation): ErrorCode[] {
  const codes = new Set<ErrorCode>();
  if (operation.auth === 'api_key' || operation.auth === 'api_key_or_session') {
    codes.add('missing_auth_header').add('malformed_auth_header').add('unknown_api_key').add('too_many_requests');
    if (operation.scope !== null) codes.add('forbidden');
  }
  if (operation.auth === 'connect_session' || operation.auth === 'api_key_or_session') {
    codes.add('missing_auth_header').add('unknown_connect_session_token').add('too_many_requests');
  }
  if (operation.auth === 'admin') codes.add('missing_auth_header').add('malformed_auth_header').add('unknown_admin_token');
  if (operation.params) codes.add('invalid_uri_params');
  // A read route ignores query parameters it does not know; any other refuses them.
  if (operation.query || (!operation.bare && operation.method !== 'get')) codes.add('invalid_query_params');
  if (operation.body) codes.add('invalid_body').add('invalid_json').add('invalid_content_type').add('payload_too_large');
  if (operation.doc.headers?.length) codes.add('invalid_headers');
  for (const code of operation.doc.errors ?? []) codes.add(code);
  codes.add('service_unavailable').add('internal_error');
  return [...codes];
}

const errorItem = {
  type: 'object',
  required: ['code', 'message', 'path'],
  properties: { code: { type: 'string' }, message: { type: 'string' }, path: { type: 'string' } },
};

const errorBody = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string', enum: Object.keys(ERROR_CODES), description: 'One of the codes of the error table; each code has one status.' },
    message: { type: 'string' },
    errors: { type: 'array', items: errorItem, description: 'What was wrong with the input, field by field.' },
    payload: { description: "More about the failure (a provider's answer, the endpoints a verification tried)." },
  },
};

function jsonContent(schema: JsonSchema): JsonSchema {
  return { 'application/json': { schema } };
}

function responsesOf(operation: Operation): Record<string, JsonSchema> {
  const { doc } = operation;
  const success: JsonSchema = { description: doc.status === 202 ? 'Accepted' : doc.status === 204 ? 'No content' : 'Success' };
  if (doc.contentType) success['content'] = { [doc.contentType]: {} };
  else if (doc.answer) success['content'] = jsonContent(jsonSchemaOf(doc.answer, 'output'));
  const responses: Record<string, JsonSchema> = { [String(doc.status ?? 200)]: success };
  for (const other of doc.otherAnswers ?? []) {
    if (responses[String(other.status)]) {
      throw new Error(`${operation.method.toUpperCase()} ${operation.path} gives two success answers the status ${other.status}`);
    }
    responses[String(other.status)] = { description: other.when, ...(other.answer ? { content: jsonContent(jsonSchemaOf(other.answer, 'output')) } : {}) };
  }

  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(operation)) {
    const status = ERROR_CODES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const schemaRef = { $ref: operation.messageShape ? '#/components/schemas/ErrorWithMessage' : '#/components/schemas/Error' };
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const own = doc.errorBodies?.[status];
    responses[String(status)] = {
      description: codes.map((code) => `\`${code}\``).join(', '),
      'x-latchkey-error-codes': codes,
      // A body of the route's own is written by the route, not as the gateway's error: no marker.
      ...(own ? {} : { headers: { 'Latchkey-Error': { $ref: '#/components/headers/LatchkeyError' } } }),
      content: jsonContent(own ? jsonSchemaOf(own, 'output') : schemaRef),
    };
  }
  return responses;
}

function securityOf(operation: Operation): Array<Record<string, string[]>> {
  const scopes = operation.scope === null ? [] : typeof operation.scope === 'string' ? [operation.scope] : [...operation.scope];
  switch (operation.auth) {
    case 'api_key':
      return [{ apiKey: scopes }];
    case 'api_key_or_session':
      // Any one of the scopes suffices: one requirement per scope, and the session as another.
      return [...scopes.map((scope) => ({ apiKey: [scope] })), { connectSession: [] }];
    case 'connect_session':
      return [{ connectSession: [] }];
    case 'admin':
      return [{ adminToken: [] }];
    case 'public':
      return [];
  }
}

function operationObject(operation: Operation): JsonSchema {
  const { doc } = operation;
  const object: JsonSchema = {
    operationId: `${operation.method}${operation.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, next: string | undefined) => (next ?? '').toUpperCase())}`,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [tagOf(operation.path)],
    security: securityOf(operation),
    'x-latchkey-scope': operation.scope,
  };
  const parameters = parametersOf(operation);
  if (parameters.length > 0) object['parameters'] = parameters;
  if (operation.body) {
    // A body whose every field is optional may be left out altogether: the route reads none as `{}`.
    object['requestBody'] = { required: !readsNoBodyAsEmpty(operation.body), content: { 'application/json': { schema: jsonSchemaOf(operation.body) } } };
  }
  object['responses'] = responsesOf(operation);
  return object;
}

function operationsOf(routes: readonly AnyRoute[], bareRoutes: readonly BareRoute[]): Operation[] {
  const operations: Operation[] = [];
  for (const route of routes) {
    // `all` is not a method a client sends; the API serves no such route.
    if (route.method === 'all') throw new Error(`${route.path}: document each method a route answers`);
    const method = route.method;
    operations.push({
      method,
      path: templatePath(route.path),
      auth: route.auth,
      scope: route.scope,
      doc: route.doc,
      ...(route.schemas.params && !route.raw ? { params: route.schemas.params as z.ZodType } : {}),
      ...(route.doc.query && !route.raw
        ? { query: route.doc.query }
        : !route.raw && querySchemaFor(method, route.schemas.query) && route.schemas.query
          ? { query: route.schemas.query as z.ZodType }
          : {}),
      ...(route.schemas.body && !route.raw ? { body: route.schemas.body as z.ZodType } : {}),
      messageShape: route.errorShape === 'message',
      bare: false,
    });
  }
  for (const route of bareRoutes) {
    for (const method of route.doc.methods) {
      operations.push({
        method,
        path: route.doc.path,
        auth: route.auth ?? 'api_key',
        scope: route.scope,
        doc: route.doc,
        messageShape: false,
        bare: true,
      });
    }
  }
  return operations;
}

export interface OpenApiDocument {
  openapi: string;
  info: Record<string, unknown>;
  paths: Record<string, Record<string, JsonSchema>>;
  [key: string]: unknown;
}

export function buildOpenApiDocument(routes: readonly AnyRoute[], bareRoutes: readonly BareRoute[]): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const operation of operationsOf(routes, bareRoutes)) {
    const item = (paths[operation.path] ??= {});
    if (item[operation.method]) throw new Error(`${operation.method.toUpperCase()} ${operation.path} is declared twice`);
    item[operation.method] = operationObject(operation);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Latchkey',
      version: '0.1.0',
      description:
        'The HTTP API of the Latchkey gateway, generated from the routes it mounts. Each operation names its scope ' +
        '(`x-latchkey-scope`, also the role in its security requirement) and every error code it may answer ' +
        '(`x-latchkey-error-codes` per status). Errors come as `{"error": {"code", "message", "errors"?, "payload"?}}`, ' +
        'except where an operation gives a status another schema (the deprecated `GET /connection/{connectionId}`); ' +
        "those in the envelope carry a `Latchkey-Error` header with the code, which tells the gateway's own errors " +
        "from a provider's answers on `/proxy`.",
    },
    tags: TAGS.map(({ name, description }) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: "An environment's secret key (`lk_sk_…`); each operation names the scope it needs.",
        },
        connectSession: {
          type: 'http',
          scheme: 'bearer',
          description: "An end user's connect-session token (`lk_cs_…`), as a bearer header or `connect_session_token`.",
        },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token, `ADMIN_TOKEN`.' },
      },
      headers: {
        LatchkeyError: {
          description:
            "The error's code. Only the gateway's own errors carry it: on `/proxy`, an answer without it is the provider's, " +
            'whatever its status and body (the gateway drops this header from providers\' answers).',
          schema: { type: 'string', enum: Object.keys(ERROR_CODES) },
        },
      },
      schemas: {
        Error: { type: 'object', required: ['error'], properties: { error: errorBody } },
        ErrorWithMessage: {
          type: 'object',
          required: ['message', 'error'],
          properties: { message: { type: 'string' }, error: errorBody },
        },
      },
    },
  };
}

/** The document as `docs/openapi.json` holds it: two-space JSON and a final newline. */
export function openApiText(routes: readonly AnyRoute[], bareRoutes: readonly BareRoute[]): string {
  return `${JSON.stringify(buildOpenApiDocument(routes, bareRoutes), null, 2)}\n`;
}
