import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { writeProvidersFile } from './support/providers.js';
import { createScopedKey, http, startStack, type Stack } from './support/stack.js';

/**
 * Bad input on every vault-backed route gives the documented status and code (with the field's
 * path where there is one) and changes nothing: the state read back afterwards is identical.
 */

/** `raw` is sent as is with content type `type`; `as` picks the key (the full-access one unless told). */
interface Req { method: string; path: string; body?: unknown; raw?: string | Uint8Array; type?: string; encoding?: string; as?: 'proxy' | 'plain' }
/** `path`: a field error with exactly this path; `scope`: named by the 403 message; `legacy`: a `{message}` body. */
interface Want { status: number; code?: string; path?: string; scope?: string; legacy?: boolean }
type Case = [name: string, request: Req, want: Want];

let stack: Stack;
const tokens: Record<'proxy' | 'plain', string> = { proxy: '', plain: '' };

// ---- request and expectation builders

const req = (method: string, path: string, body?: unknown, as?: Req['as']): Req => ({ method, path, body, ...(as ? { as } : {}) });
const raw = (method: string, path: string, text: string, type = 'application/json'): Req => ({ method, path, raw: text, type });
/** `bytes` sent as a JSON body with `Content-Encoding: encoding`. */
const encoded = (method: string, path: string, bytes: string | Uint8Array, encoding: string): Req => ({ method, path, raw: bytes, type: 'application/json', encoding });
const invalid = (code: string, path?: string): Want => ({ status: 400, code, ...(path === undefined ? {} : { path }) });
const notFound = (code: string): Want => ({ status: 404, code });
const conflict = (code: string): Want => ({ status: 409, code });
const forbidden = (scope: string): Want => ({ status: 403, code: 'forbidden', scope });
const legacy = (status: number): Want => ({ status, legacy: true });
const body = (path: string) => invalid('invalid_body', path);
const query = (path?: string) => invalid('invalid_query_params', path);
const uri = (path: string) => invalid('invalid_uri_params', path);
/** Answered (200): a read route ignores query parameters it does not know, and lets either read scope refresh. */
const ignored: Want = { status: 200 };

const long = (length: number) => 'x'.repeat(length);
const withQuery = (path: string, extra: string) => `${path}${path.includes('?') ? '&' : '?'}${extra}`;
const tooManyTags = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`t${i}`, 'v']));
/** JSON of `{a: [[…]]}`, arrays `levels` deep: past 32, refused where the 33rd level starts. */
const nestedText = (levels: number) => `{"a":${'['.repeat(levels)}${']'.repeat(levels)}}`;
const tooDeepPath = (field: string) => `${field}.a${'.0'.repeat(31)}`;
/** `body` as JSON, its metadata replaced by `nestedText(levels)` (too deep for JSON.stringify's stack to write). */
const withDeepMetadata = (method: string, path: string, valid: Record<string, unknown>, levels: number) =>
  raw(method, path, JSON.stringify({ ...valid, metadata: 'DEEP' }).replace('"DEEP"', nestedText(levels)));

/** The request-shape cases every JSON body route shares; `valid` is a body the route would accept. */
function shape(method: string, path: string, valid: unknown, scope: string): Case[] {
  return [
    ['malformed JSON', raw(method, path, '{"a":'), invalid('invalid_json')],
    ['a gzip body that is not gzip', encoded(method, path, 'notgzip!', 'gzip'), invalid('invalid_json')],
    ['a gzip body cut short', encoded(method, path, gzipSync(JSON.stringify(valid)).subarray(0, 12), 'gzip'), invalid('invalid_json')],
    ['text/plain body', raw(method, path, JSON.stringify(valid), 'text/plain'), { status: 415, code: 'invalid_content_type' }],
    ['form body', raw(method, path, 'a=1', 'application/x-www-form-urlencoded'), { status: 415, code: 'invalid_content_type' }],
    ['array body', req(method, path, [valid]), invalid('invalid_body')],
    ['body over the limit', req(method, path, { pad: long(70_000) }), { status: 413, code: 'payload_too_large' }],
    ['unknown query key', req(method, withQuery(path, 'bogus=1'), valid), query()],
    ['missing scope', req(method, path, valid, 'proxy'), forbidden(scope)],
  ];
}

// ---- credentials: each type without one required field

const MISSING: Array<[Record<string, unknown>, string]> = [
  [{ type: 'OAUTH2', raw: {} }, 'access_token'],
  [{ type: 'OAUTH1', oauth_token: 't', raw: {} }, 'oauth_token_secret'],
  [{ type: 'BASIC', password: 'p' }, 'username'],
  [{ type: 'API_KEY' }, 'apiKey'],
  [{ type: 'APP', raw: {} }, 'access_token'],
  [{ type: 'JWT' }, 'privateKey'],
  [{ type: 'OAUTH2_CC', client_id: 'c', token: 't', raw: {} }, 'client_secret'],
  [{ type: 'APP_STORE', access_token: 't', raw: {} }, 'private_key'],
  [{ type: 'CUSTOM' }, 'raw'],
  [{ type: 'TBA', token_id: 'i', token_secret: 's' }, 'config_override'],
  [{ type: 'BILL', dev_key: 'd', organization_id: 'o', username: 'u', raw: {} }, 'password'],
  [{ type: 'TWO_STEP' }, 'raw'],
  [{ type: 'SIGNATURE', username: 'u' }, 'password'],
];

const imported = (extra: Record<string, unknown> = {}) => ({ provider_config_key: 'keys', connection_id: 'new', credentials: { type: 'API_KEY', apiKey: 'k' }, ...extra });
const createIntegration = (extra: Record<string, unknown>) => req('POST', '/integrations', { provider: 'github', unique_key: 'new', ...extra });
const patchSpare = (patch: unknown) => req('PATCH', '/integrations/spare', patch);
/** `POST /connections` with a valid import changed by `extra`. */
const importing = (extra: Record<string, unknown>) => req('POST', '/connections', imported(extra));
const importCredentials = (credentials: Record<string, unknown>) => importing({ credentials });
const patchC1 = (patch: unknown) => req('PATCH', '/connections/c1?provider_config_key=keys', patch);
const readC1 = (as: Req['as'], extra = '') => req('GET', `/connections/c1?provider_config_key=keys${extra}`, undefined, as);
const metadataBody = (extra: Record<string, unknown> = {}) => ({ connection_id: 'c1', provider_config_key: 'keys', metadata: { x: 1 }, ...extra });

function metadataCases(method: 'POST' | 'PATCH'): Case[] {
  const at = (body: unknown) => req(method, '/connections/metadata', body);
  const without = (key: string) => Object.fromEntries(Object.entries(metadataBody()).filter(([name]) => name !== key));
  return [
    ...shape(method, '/connections/metadata', metadataBody(), 'environment:connections:update'),
    ['unknown body key', at(metadataBody({ bogus: 1 })), invalid('invalid_body')],
    ['no connection_id', at(without('connection_id')), body('connection_id')],
    ['no provider_config_key', at(without('provider_config_key')), body('provider_config_key')],
    ['no metadata', at(without('metadata')), body('metadata')],
    ['metadata an array', at(metadataBody({ metadata: [1] })), body('metadata')],
    ['connection_id a number', at(metadataBody({ connection_id: 1 })), body('connection_id')],
    ['connection_id an empty list', at(metadataBody({ connection_id: [] })), body('connection_id')],
    ['connection_id over 1000 ids', at(metadataBody({ connection_id: Array.from({ length: 1001 }, (_, i) => `c${i}`) })), body('connection_id')],
    ['connection_id too long', at(metadataBody({ connection_id: long(256) })), body('connection_id')],
    ['dotted metadata key', at(metadataBody({ metadata: { 'a.b': 1 } })), body('metadata.a.b')],
    ['$ metadata key', at(metadataBody({ metadata: { $set: 1 } })), body('metadata.$set')],
    ['nested $ metadata key', at(metadataBody({ metadata: { a: { $x: 1 } } })), body('metadata.a.$x')],
    ['metadata nested past 32 levels', withDeepMetadata(method, '/connections/metadata', metadataBody(), 32), body(tooDeepPath('metadata'))],
    ['metadata nested 20,000 levels', withDeepMetadata(method, '/connections/metadata', metadataBody(), 20_000), body(tooDeepPath('metadata'))],
    ['one unknown connection among known', at(metadataBody({ connection_id: ['c1', 'ghost'] })), notFound('unknown_connection')],
    ['unknown integration', at(metadataBody({ provider_config_key: 'nope' })), notFound('unknown_provider_config')],
  ];
}

const ROUTES: Record<string, Case[]> = {
  'GET /providers': [
    ['unknown query key ignored', req('GET', '/providers?bogus=1'), ignored],
    ['search too long', req('GET', `/providers?search=${long(101)}`), query('search')],
    ['search given twice', req('GET', '/providers?search=a&search=b'), query('search')],
    ['missing scope', req('GET', '/providers', undefined, 'proxy'), forbidden('environment:integrations:list')],
  ],
  'GET /providers/{provider}': [
    ['unknown provider', req('GET', '/providers/no-such-provider'), notFound('unknown_provider')],
    ['name too long', req('GET', `/providers/${long(101)}`), uri('provider')],
    ['unknown query key ignored', req('GET', '/providers/github?bogus=1'), ignored],
    ['missing scope', req('GET', '/providers/github', undefined, 'proxy'), forbidden('environment:integrations:list')],
  ],
  'GET /integrations': [
    ['unknown query key ignored', req('GET', '/integrations?bogus=1'), ignored],
    ['missing scope', req('GET', '/integrations', undefined, 'proxy'), forbidden('environment:integrations:list')],
  ],
  'POST /integrations': [
    ...shape('POST', '/integrations', { provider: 'github', unique_key: 'new' }, 'environment:integrations:create'),
    ['unknown body key', createIntegration({ bogus: 1 }), invalid('invalid_body')],
    ['custom on create', req('POST', '/integrations', { provider: 'github', unique_key: 'new', custom: {} }), invalid('invalid_body')],
    ['no provider', req('POST', '/integrations', { unique_key: 'new' }), body('provider')],
    ['no unique_key', req('POST', '/integrations', { provider: 'github' }), body('unique_key')],
    ['display_name a number', createIntegration({ display_name: 5 }), body('display_name')],
    ['forward_webhooks a string', createIntegration({ forward_webhooks: 'true' }), body('forward_webhooks')],
    ['credential not a string', req('POST', '/integrations', { provider: 'github', unique_key: 'new', credentials: { client_id: 1 } }), body('credentials.client_id')],
    ['unique_key with a space', req('POST', '/integrations', { provider: 'github', unique_key: 'a b' }), body('unique_key')],
    ['unique_key too long', req('POST', '/integrations', { provider: 'github', unique_key: long(129) }), body('unique_key')],
    ['display_name too long', createIntegration({ display_name: long(256) }), body('display_name')],
    ['unknown provider', req('POST', '/integrations', { provider: 'no-such-provider', unique_key: 'new' }), body('provider')],
    ['duplicate unique_key', req('POST', '/integrations', { provider: 'github', unique_key: 'keys' }), conflict('duplicate_provider_config')],
  ],
  'GET /integrations/{uniqueKey}': [
    ['unknown integration', req('GET', '/integrations/nope'), notFound('unknown_provider_config')],
    ['unknown include', req('GET', '/integrations/keys?include=bogus'), query()],
    ['unknown query key ignored', req('GET', '/integrations/keys?bogus=1'), ignored],
    ['key too long', req('GET', `/integrations/${long(129)}`), uri('uniqueKey')],
    ['credentials without the credentials scope', req('GET', '/integrations/keys?include=credentials', undefined, 'plain'), forbidden('environment:integrations:read_credentials')],
    ['missing scope', req('GET', '/integrations/keys', undefined, 'proxy'), forbidden('environment:integrations:read')],
  ],
  'PATCH /integrations/{uniqueKey}': [
    ...shape('PATCH', '/integrations/spare', { display_name: 'Changed' }, 'environment:integrations:update'),
    ['unknown body key', patchSpare({ display_name: 'Changed', bogus: 1 }), invalid('invalid_body')],
    ['one good field, one of the wrong type', patchSpare({ display_name: 'Changed', forward_webhooks: 'yes' }), body('forward_webhooks')],
    ['display_name null', patchSpare({ display_name: null }), body('display_name')],
    ['integration_config value a number', patchSpare({ integration_config: { a: 1 } }), body('integration_config.a')],
    ['custom an array', patchSpare({ custom: ['a'] }), body('custom')],
    ['bad unique_key', patchSpare({ unique_key: '-x' }), body('unique_key')],
    ['rename onto a taken key', patchSpare({ unique_key: 'keys' }), conflict('duplicate_provider_config')],
    ['rename with connections', req('PATCH', '/integrations/keys', { unique_key: 'renamed', display_name: 'Changed' }), conflict('integration_has_connections')],
    ['unknown integration', req('PATCH', '/integrations/nope', { display_name: 'Changed' }), notFound('unknown_provider_config')],
    ['key too long', req('PATCH', `/integrations/${long(129)}`, { display_name: 'Changed' }), uri('uniqueKey')],
  ],
  'DELETE /integrations/{uniqueKey}': [
    ['unknown integration', req('DELETE', '/integrations/nope'), notFound('unknown_provider_config')],
    ['unknown query key', req('DELETE', '/integrations/spare?bogus=1'), query()],
    ['key too long', req('DELETE', `/integrations/${long(129)}`), uri('uniqueKey')],
    ['missing scope', req('DELETE', '/integrations/spare', undefined, 'proxy'), forbidden('environment:integrations:delete')],
  ],
  'POST /connections': [
    ...shape('POST', '/connections', imported(), 'environment:connections:create'),
    ['unknown body key', importing({ bogus: 1 }), invalid('invalid_body')],
    ['no provider_config_key', req('POST', '/connections', { credentials: { type: 'API_KEY', apiKey: 'k' } }), body('provider_config_key')],
    ['no credentials', req('POST', '/connections', { provider_config_key: 'keys' }), body('credentials')],
    ['metadata a string', importing({ metadata: 'x' }), body('metadata')],
    ['connection_config an array', importing({ connection_config: [] }), body('connection_config')],
    ['connection_id a number', importing({ connection_id: 7 }), body('connection_id')],
    ['connection_id too long', importing({ connection_id: long(256) }), body('connection_id')],
    // A URL's path resolves these away (`/connections/.` is `/connections/`): never addressable.
    ['connection_id "."', importing({ connection_id: '.' }), body('connection_id')],
    ['connection_id ".."', importing({ connection_id: '..' }), body('connection_id')],
    ['11 tags', importing({ tags: tooManyTags }), body('tags')],
    ['tag value over 255', importing({ tags: { team: long(256) } }), body('tags.team')],
    ['tag key over 64', importing({ tags: { [long(65)]: 'v' } }), body(`tags.${long(65)}`)],
    ['$ tag key', importing({ tags: { $x: 'y' } }), body('tags.$x')],
    ['dotted tag key', importing({ tags: { 'a.b': 'y' } }), body('tags.a.b')],
    ['dotted metadata key', importing({ metadata: { 'a.b': 1 } }), body('metadata.a.b')],
    ['$ metadata key', importing({ metadata: { $set: 1 } }), body('metadata.$set')],
    ['metadata nested 20,000 levels', withDeepMetadata('POST', '/connections', imported(), 20_000), body(tooDeepPath('metadata'))],
    ['end_user without id', importing({ end_user: { email: 'a@b.c' } }), body('end_user.id')],
    // Listed by `?endUserId`, which takes at most 255: a longer id could never be found.
    ['end_user id over 255', importing({ end_user: { id: long(256) } }), body('end_user.id')],
    ['dotted end_user tag key', importing({ end_user: { id: 'u', tags: { 'a.b': 'y' } } }), body('end_user.tags.a.b')],
    ['$ end_user tag key', importing({ end_user: { id: 'u', tags: { $x: 'y' } } }), body('end_user.tags.$x')],
    // Free-form JSON that JSON.parse takes and JSON.stringify cannot write: a 500 before.
    ['credentials.raw nested 20,000 levels', raw('POST', '/connections', JSON.stringify(imported({ credentials: { type: 'OAUTH2', access_token: 't', raw: 'DEEP' } })).replace('"DEEP"', nestedText(20_000))), invalid('invalid_body')],
    ['credentials.raw nested 65 levels', raw('POST', '/connections', JSON.stringify(imported({ credentials: { type: 'OAUTH2', access_token: 't', raw: 'DEEP' } })).replace('"DEEP"', nestedText(65))), invalid('invalid_body')],
    ['unknown credential type', importCredentials({ type: 'NOPE' }), body('credentials.type')],
    ['unknown credential field', importCredentials({ type: 'API_KEY', apiKey: 'k', extra: 1 }), body('credentials')],
    ['apiKey a number', importCredentials({ type: 'API_KEY', apiKey: 1 }), body('credentials.apiKey')],
    ['apiKey too long', importCredentials({ type: 'API_KEY', apiKey: long(16_385) }), body('credentials.apiKey')],
    ['expires_at not a date', importCredentials({ type: 'OAUTH2', access_token: 't', expires_at: 'soon', raw: {} }), body('credentials.expires_at')],
    ...MISSING.map(([credentials, field]): Case => [`${String(credentials['type'])} without ${field}`, importCredentials(credentials), body(`credentials.${field}`)]),
    ['credentials of another type than the provider', importCredentials({ type: 'BASIC', username: 'u', password: 'p' }), body('credentials.type')],
    ['taken connection_id', importing({ connection_id: 'c1' }), body('connection_id')],
    // Found wrong at each later refresh otherwise, each read answering 400 about a body field.
    [
      'a host-bearing config value that is no host',
      req('POST', '/connections', { provider_config_key: 'desk', connection_id: 'new', credentials: { type: 'OAUTH2', access_token: 't', raw: {} }, connection_config: { subdomain: 'a.b/x' } }),
      body('connection_config.subdomain'),
    ],
    ['unknown integration', importing({ provider_config_key: 'nope' }), notFound('unknown_provider_config')],
  ],
  'GET /connections': [
    ['unknown query key ignored', req('GET', '/connections?bogus=1'), ignored],
    ['limit 0', req('GET', '/connections?limit=0'), query('limit')],
    ['limit over 1000', req('GET', '/connections?limit=1001'), query('limit')],
    ['limit not a number', req('GET', '/connections?limit=ten'), query('limit')],
    ['negative page', req('GET', '/connections?page=-1'), query('page')],
    ['nested tag filter', req('GET', '/connections?tags[a][b]=c'), query('tags.a')],
    ['connectionId given twice', req('GET', '/connections?connectionId=a&connectionId=b'), query('connectionId')],
    // Each integration and tag is a list read of its own: one request asked for thousands.
    ['101 integrations', req('GET', `/connections?integrationId=${Array.from({ length: 101 }, (_, i) => `i${i}`).join(',')}`), query('integrationId')],
    ['11 tags', req('GET', `/connections?${Array.from({ length: 11 }, (_, i) => `tags[t${i}]=v`).join('&')}`), query('tags')],
    ['connectionId too long', req('GET', `/connections?connectionId=${long(256)}`), query('connectionId')],
    ['search too long', req('GET', `/connections?search=${long(256)}`), query('search')],
    ['missing scope', req('GET', '/connections', undefined, 'proxy'), forbidden('environment:connections:list')],
  ],
  'GET /connections/{id}': [
    ['no provider_config_key', req('GET', '/connections/c1'), query('provider_config_key')],
    ['unknown query key ignored', req('GET', '/connections/c1?provider_config_key=keys&bogus=1'), ignored],
    ['force_refresh not a boolean', req('GET', '/connections/c1?provider_config_key=keys&force_refresh=yes'), query('force_refresh')],
    ['refresh_token not a boolean', req('GET', '/connections/c1?provider_config_key=keys&refresh_token=1'), query('refresh_token')],
    ['id too long', req('GET', `/connections/${long(256)}?provider_config_key=keys`), uri('connectionId')],
    ['unknown connection', req('GET', '/connections/ghost?provider_config_key=keys'), notFound('unknown_connection')],
    ['unknown integration', req('GET', '/connections/c1?provider_config_key=nope'), notFound('unknown_provider_config')],
    ['force_refresh with the plain read scope is allowed', readC1('plain', '&force_refresh=true'), ignored],
    ['refresh_token with the plain read scope is allowed', readC1('plain', '&refresh_token=true'), ignored],
    ['missing scope', readC1('proxy'), forbidden('environment:connections:read')],
  ],
  'GET /connection/{id} (deprecated)': [
    ['no provider_config_key', req('GET', '/connection/c1'), legacy(400)],
    ['unknown query key ignored', req('GET', '/connection/c1?provider_config_key=keys&bogus=1'), ignored],
    ['force_refresh not a boolean', req('GET', '/connection/c1?provider_config_key=keys&force_refresh=yes'), legacy(400)],
    ['id too long', req('GET', `/connection/${long(256)}?provider_config_key=keys`), legacy(400)],
    ['unknown connection', req('GET', '/connection/ghost?provider_config_key=keys'), legacy(404)],
    ['unknown integration', req('GET', '/connection/c1?provider_config_key=nope'), legacy(404)],
    ['force_refresh with the plain read scope is allowed', req('GET', '/connection/c1?provider_config_key=keys&force_refresh=true', undefined, 'plain'), ignored],
    ['missing scope', req('GET', '/connection/c1?provider_config_key=keys', undefined, 'proxy'), forbidden('environment:connections:read')],
  ],
  'PATCH /connections/{id}': [
    ...shape('PATCH', '/connections/c1?provider_config_key=keys', { tags: { team: 'blue' } }, 'environment:connections:update'),
    ['unknown body key beside good tags', patchC1({ tags: { team: 'blue' }, bogus: 1 }), invalid('invalid_body')],
    ['tags a string', patchC1({ tags: 'team' }), body('tags')],
    ['11 tags', patchC1({ tags: tooManyTags }), body('tags')],
    ['tag value over 255', patchC1({ tags: { team: long(256) } }), body('tags.team')],
    ['tag value a number', patchC1({ tags: { team: 1 } }), body('tags.team')],
    ['$ tag key', patchC1({ tags: { $x: 'y' } }), body('tags.$x')],
    ['end_user without id', patchC1({ end_user: {} }), body('end_user.id')],
    ['no provider_config_key', req('PATCH', '/connections/c1', { tags: { team: 'blue' } }), query('provider_config_key')],
    ['id too long', req('PATCH', `/connections/${long(256)}?provider_config_key=keys`, { tags: {} }), uri('connectionId')],
    ['unknown connection', req('PATCH', '/connections/ghost?provider_config_key=keys', { tags: {} }), notFound('unknown_connection')],
    ['unknown integration', req('PATCH', '/connections/c1?provider_config_key=nope', { tags: {} }), notFound('unknown_provider_config')],
  ],
  'DELETE /connections/{id}': [
    ['no provider_config_key', req('DELETE', '/connections/c1'), query('provider_config_key')],
    ['unknown query key', req('DELETE', '/connections/c1?provider_config_key=keys&bogus=1'), query()],
    ['id too long', req('DELETE', `/connections/${long(256)}?provider_config_key=keys`), uri('connectionId')],
    ['unknown connection', req('DELETE', '/connections/ghost?provider_config_key=keys'), notFound('unknown_connection')],
    ['unknown integration', req('DELETE', '/connections/c1?provider_config_key=nope'), notFound('unknown_provider_config')],
    ['missing scope', req('DELETE', '/connections/c1?provider_config_key=keys', undefined, 'proxy'), forbidden('environment:connections:delete')],
  ],
  'POST /connections/metadata': metadataCases('POST'),
  'PATCH /connections/metadata': metadataCases('PATCH'),
};

// ---- running them

async function send(request: Req): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${request.as ? tokens[request.as] : stack.bootstrapKey}` };
  let payload: string | Uint8Array | undefined;
  if (request.raw !== undefined) payload = request.raw;
  else if (request.body !== undefined) payload = JSON.stringify(request.body);
  if (payload !== undefined) headers['content-type'] = request.type ?? 'application/json';
  if (request.encoding !== undefined) headers['content-encoding'] = request.encoding;
  const response = await fetch(`${stack.url}${request.path}`, { method: request.method, headers, ...(payload === undefined ? {} : { body: payload }) });
  const text = await response.text();
  try {
    return { status: response.status, json: JSON.parse(text) };
  } catch {
    return { status: response.status, json: text };
  }
}

function meets(answer: { status: number; json: any }, want: Want): boolean {
  if (answer.status !== want.status) return false;
  if (want.status === 200) return true;
  if (want.legacy) return typeof answer.json?.message === 'string' && Object.keys(answer.json).length === 1;
  const error = answer.json?.error;
  if (error?.code !== want.code) return false;
  if (want.path !== undefined && !error.errors?.some((item: { path: string }) => item.path === want.path)) return false;
  return want.scope === undefined || String(error.message).includes(want.scope);
}

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

/** Everything these routes could change, read back through the API. */
async function state() {
  const read = async (path: string) => (await api('GET', path)).json;
  const connection = async (id: string) => ({ ...(await read(`/connections/${id}?provider_config_key=keys`)), last_fetched_at: null });
  return {
    integrations: (await read('/integrations')).data,
    keys: await read('/integrations/keys?include=credentials'),
    spare: await read('/integrations/spare?include=credentials'),
    connections: await read('/connections'),
    c1: await connection('c1'),
    c2: await connection('c2'),
  };
}

const newKey = (scopes: string[]) => createScopedKey(stack, scopes);

beforeAll(async () => {
  const providers = writeProvidersFile('loopback-key:\n  display_name: Loopback API key\n  categories: [test]\n  auth_mode: API_KEY\n');
  stack = await startStack({ env: { PROVIDERS_FILE: providers, MAX_BODY_BYTES: String(64 * 1024) } });
  tokens.proxy = await newKey(['environment:proxy']);
  tokens.plain = await newKey(['environment:integrations:read', 'environment:connections:read']);
  await api('POST', '/integrations', { provider: 'loopback-key', unique_key: 'keys', credentials: { client_id: 'id', client_secret: 'secret' } });
  await api('POST', '/integrations', { provider: 'github', unique_key: 'spare', display_name: 'Spare', integration_config: { a: '1' } });
  await api('POST', '/integrations', { provider: 'zendesk', unique_key: 'desk', credentials: { client_id: 'id', client_secret: 'secret' } });
  await api('POST', '/connections', imported({ connection_id: 'c1', tags: { Team: 'red' }, metadata: { plan: 'pro', nested: { a: 1 } } }));
  await api('POST', '/connections', imported({ connection_id: 'c2' }));
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('bad input on every vault-backed route gives the documented code and changes nothing', () => {
  it('starts from the expected state', async () => {
    const before = await state();
    expect(before.integrations.map((item: { unique_key: string }) => item.unique_key).sort()).toEqual(['desk', 'keys', 'spare']);
    expect(before.c1).toMatchObject({ tags: { team: 'red' }, metadata: { plan: 'pro', nested: { a: 1 } }, credentials: { apiKey: 'k' } });
    expect(before.connections.connections).toHaveLength(2);
  });

  it.each(Object.entries(ROUTES))('%s', async (_route, cases) => {
    const before = await state();
    const wrong: unknown[] = [];
    for (const [name, request, want] of cases) {
      const answer = await send(request);
      if (!meets(answer, want)) wrong.push({ case: name, request: `${request.method} ${request.path.slice(0, 120)}`, want, got: answer });
    }
    // One assertion, so that a failure shows both the wrong answers and any change they made.
    expect({ wrong, state: await state() }).toEqual({ wrong: [], state: before });
  });
});
