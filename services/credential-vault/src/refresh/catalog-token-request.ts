import { AppError } from '@latchkey/errors';
import type { TokenRequest } from '../catalog/provider-schema.js';
import { interpolate, interpolateUrl, templateCredentials, type TemplateContext } from '../catalog/interpolate.js';
import { checkHostValue, hostBearingKeys } from '../catalog/provider-url.js';
import { callTokenEndpoint } from './token-endpoint.js';
import { credentialsOfType, type CredentialsOf, type RefreshContext } from './refresh-context.js';

/** The credential types whose token is bought through the provider's `token_request`. */
export type TokenRequestType = 'TWO_STEP' | 'BILL' | 'SIGNATURE';

/** Longest provider error text kept in a refresh failure (it is logged and shown to the customer). */
export const MAX_ERROR_TEXT = 200;

/**
 * When a token stated to live `seconds` from `now` expires; undefined for a lifetime a date
 * cannot hold (a provider's `expires_in` of 1e13 threw, after the provider had answered: a
 * refresh token it had rotated was lost with the answer).
 */
export function expiryAfter(now: Date, seconds: number): string | undefined {
  const at = now.getTime() + seconds * 1000;
  return Number.isFinite(at) && Math.abs(at) <= 8.64e15 ? new Date(at).toISOString() : undefined;
}

/** The value at a dotted path (`response_data.sessionId`, `items.0.token`), or undefined. */
export function valueAtPath(value: unknown, path: string): unknown {
  let current = value;
  for (const segment of path.split('.')) {
    if (Array.isArray(current) && /^\d+$/.test(segment)) current = current[Number(segment)];
    else if (current !== null && typeof current === 'object' && !Array.isArray(current) && Object.hasOwn(current, segment)) {
      current = (current as Record<string, unknown>)[segment];
    } else return undefined;
  }
  return current;
}

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * What the templates read: a TWO_STEP connection's `${credentials.FIELD}` falls back to
 * `raw.FIELD` (`templateCredentials`). `${username}` and `${password}` are the credentials' own
 * fields (BILL, SIGNATURE).
 */
export function templateContextOf(type: TokenRequestType, credentials: Record<string, unknown>, connectionConfig: Record<string, unknown>): TemplateContext {
  const fields = templateCredentials({ ...credentials, type });
  const text = (key: string) => (typeof fields[key] === 'string' ? (fields[key] as string) : undefined);
  return { connectionConfig, credentials: fields, username: text('username'), password: text('password') };
}

export interface BuiltTokenRequest {
  method: TokenRequest['method'];
  url: string;
  headers: Record<string, string>;
  /** Absent for GET; an object sent as JSON or as a form, per `body_format`. */
  body?: { format: TokenRequest['body_format']; fields: Record<string, string> };
}

function fill(template: string, context: TemplateContext, filler = interpolate): string {
  try {
    return filler(template, context);
  } catch (error) {
    // The message names the placeholder only, never a value.
    const message = (error as Error).message;
    throw new AppError('refresh_token_external_error', `The provider's token request cannot be built: ${message}`, {
      payload: { error: message.startsWith('missing value') ? 'missing_value' : 'invalid_token_url', message },
    });
  }
}

/** The HTTP request the provider entry describes, with this connection's values filled in. */
export function buildTokenRequest(spec: TokenRequest, context: TemplateContext): BuiltTokenRequest {
  // Each value checked or encoded for its place in the URL.
  const url = fill(spec.url, context, interpolateUrl);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    parsed = new URL('invalid:');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new AppError('refresh_token_external_error', "The provider's token URL is not an http(s) URL once filled", { payload: { error: 'invalid_token_url' } });
  }
  const fillMap = (map: Record<string, string> | undefined) => Object.fromEntries(Object.entries(map ?? {}).map(([key, value]) => [key, fill(value, context)]));
  const headers = { accept: 'application/json', ...fillMap(spec.headers) };
  return {
    method: spec.method,
    url: parsed.toString(),
    headers,
    ...(spec.method === 'GET' ? {} : { body: { format: spec.body_format, fields: fillMap(spec.body) } }),
  };
}

const textOf = (value: unknown) => (typeof value === 'string' || typeof value === 'number' ? String(value).slice(0, MAX_ERROR_TEXT) : undefined);

/**
 * The provider's error code and message, if its answer carries them: OAuth-style `error` /
 * `error_description`, `code` / `message`, a nested `error: {code, message}`, looked for at the
 * top and in the object the token would have been in (Bill.com answers 200 with
 * `response_data.error_code`). Only these fields are kept: the rest of an answer may echo secrets.
 */
export function providerErrorFields(answer: unknown, tokenPath: string): { error?: string; message?: string } {
  const parentPath = tokenPath.split('.').slice(0, -1).join('.');
  const places = [answer, ...(parentPath ? [valueAtPath(answer, parentPath)] : [])].filter(isRecord);
  for (const place of places) {
    const nested = isRecord(place['error']) ? place['error'] : {};
    const error = textOf(place['error']) ?? textOf(place['error_code']) ?? textOf(place['code']) ?? textOf(nested['code']);
    const message = textOf(place['error_description']) ?? textOf(place['error_message']) ?? textOf(place['message']) ?? textOf(nested['message']);
    if (error !== undefined || message !== undefined) return { ...(error === undefined ? {} : { error }), ...(message === undefined ? {} : { message }) };
  }
  return {};
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Token and expiry from a successful answer; a token of the wrong kind is a provider error. */
export function readTokenAnswer(spec: TokenRequest, answer: unknown, now: Date): { token: string; expiresAt: string | undefined } {
  const token = valueAtPath(answer, spec.token_path);
  if ((typeof token !== 'string' || token === '') && typeof token !== 'number') {
    throw new AppError('refresh_token_external_error', `The provider answered without a token at ${spec.token_path}`, {
      payload: { error: 'no_token', ...providerErrorFields(answer, spec.token_path) },
    });
  }
  const stated = spec.expires_in_path === undefined ? undefined : Number(valueAtPath(answer, spec.expires_in_path) ?? Number.NaN);
  const seconds = stated !== undefined && Number.isFinite(stated) && stated > 0 ? stated : spec.expires_in_seconds;
  return { token: String(token), expiresAt: seconds === undefined ? undefined : expiryAfter(now, seconds) };
}

/**
 * TWO_STEP, BILL, SIGNATURE: buys a token with the connection's credentials as the provider
 * entry's `token_request` describes.
 *
 * TWO_STEP keeps `raw` as it was: it holds the fields the next token request reads, and
 * replacing it with the provider's answer would make that request impossible.
 */
export async function refreshWithTokenRequest(type: TokenRequestType, context: RefreshContext): Promise<CredentialsOf<TokenRequestType>> {
  const spec = context.provider.token_request;
  if (!spec) {
    throw new AppError('refresh_token_external_error', `The provider entry does not say how to obtain a ${type} token (token_request)`, {
      payload: { error: 'no_token_request' },
    });
  }
  // The host of the token request's URL is checked like every provider URL's (catalog/provider-url.ts).
  for (const key of hostBearingKeys(spec.url)) checkHostValue(key, context.connectionConfig[key], context.provider.connection_config);
  const request = buildTokenRequest(spec, templateContextOf(type, context.credentials, context.connectionConfig));
  const response = await callTokenEndpoint(context.http, request.url, {
    method: request.method,
    headers: request.headers,
    ...(request.body === undefined ? {} : request.body.format === 'json' ? { json: request.body.fields } : { form: request.body.fields as Record<string, string> }),
    timeoutMs: context.timeoutMs,
  });
  const answer = parseJson(response.body);
  if (response.statusCode >= 300) {
    const fields = providerErrorFields(answer, spec.token_path);
    throw new AppError('refresh_token_external_error', `The provider refused the token request: ${fields.error ?? `http_${response.statusCode}`}${fields.message ? ` (${fields.message})` : ''}`, {
      payload: { status: response.statusCode, error: `http_${response.statusCode}`, ...fields },
    });
  }
  if (answer === undefined) {
    throw new AppError('refresh_token_external_error', 'The provider answered the token request with something other than JSON', {
      payload: { status: response.statusCode, error: 'invalid_response' },
    });
  }
  const { token, expiresAt } = readTokenAnswer(spec, answer, context.now);
  // A lifetime the provider no longer states must not survive from the previous token.
  const expiry = expiresAt === undefined ? {} : { expires_at: expiresAt };
  switch (type) {
    case 'TWO_STEP': {
      const { expires_at: _previous, ...kept } = credentialsOfType(context.credentials, type);
      return { ...kept, type, token, ...expiry };
    }
    case 'BILL': {
      const { expires_at: _previous, ...kept } = credentialsOfType(context.credentials, type);
      return { ...kept, type, session_id: token, ...expiry, raw: isRecord(answer) ? answer : { answer } };
    }
    case 'SIGNATURE': {
      const { expires_at: _previous, ...kept } = credentialsOfType(context.credentials, type);
      return { ...kept, type, token, ...expiry };
    }
  }
}
