import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { tokenRequestSchema } from '../catalog/provider-schema.js';
import { buildTokenRequest, providerErrorFields, readTokenAnswer, templateContextOf, valueAtPath } from './catalog-token-request.js';

const bill = tokenRequestSchema.parse({
  url: 'https://${connectionConfig.host}.bill.test/api/v2/Login.json?org=${credentials.organization_id}',
  body_format: 'form',
  body: { userName: '${username}', password: '${credentials.password}', orgId: '${credentials.organization_id}', devKey: '${credentials.dev_key}' },
  headers: { 'X-Org': '${credentials.organization_id}' },
  token_path: 'response_data.sessionId',
  expires_in_seconds: 2100,
});

const billCredentials = { type: 'BILL', username: 'ada@acme.test', password: 'p&ss=word', organization_id: 'org 1/2', dev_key: 'dk-1', raw: {} };

/** The AppError a call throws, for matching its code and payload. */
function thrown(call: () => unknown): AppError {
  try {
    call();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError');
}

describe('valueAtPath', () => {
  it('walks objects and array indexes', () => {
    const answer = { response_data: { sessionId: 's-1', items: [{ token: 't-0' }] }, n: 0 };
    expect(valueAtPath(answer, 'response_data.sessionId')).toBe('s-1');
    expect(valueAtPath(answer, 'response_data.items.0.token')).toBe('t-0');
    expect(valueAtPath(answer, 'n')).toBe(0);
  });

  it('is undefined for a missing step, a scalar in the way or an inherited property', () => {
    expect(valueAtPath({ a: { b: 1 } }, 'a.c')).toBeUndefined();
    expect(valueAtPath({ a: 'text' }, 'a.length')).toBeUndefined();
    expect(valueAtPath({ a: [1] }, 'a.x')).toBeUndefined();
    expect(valueAtPath({}, 'constructor')).toBeUndefined();
    expect(valueAtPath(null, 'a')).toBeUndefined();
  });
});

describe('templateContextOf', () => {
  it('lets TWO_STEP templates read fields of raw; top-level fields win', () => {
    const context = templateContextOf('TWO_STEP', { type: 'TWO_STEP', token: 'old', raw: { username: 'u', password: 'p', token: 'raw-token' } }, { tenant: 't' });
    expect(context.credentials).toMatchObject({ username: 'u', password: 'p', token: 'old' });
    expect(context).toMatchObject({ username: 'u', password: 'p', connectionConfig: { tenant: 't' } });
  });

  it('does not read raw for the other types', () => {
    const context = templateContextOf('BILL', { ...billCredentials, raw: { devKey: 'from-answer' } }, {});
    expect(context.credentials?.['devKey']).toBeUndefined();
    expect(context.username).toBe('ada@acme.test');
  });
});

describe('buildTokenRequest', () => {
  it('fills url, headers and body; values in the URL are encoded', () => {
    const built = buildTokenRequest(bill, templateContextOf('BILL', billCredentials, { host: 'eu' }));
    expect(built).toEqual({
      method: 'POST',
      url: 'https://eu.bill.test/api/v2/Login.json?org=org%201%2F2',
      headers: { accept: 'application/json', 'X-Org': 'org 1/2' },
      body: { format: 'form', fields: { userName: 'ada@acme.test', password: 'p&ss=word', orgId: 'org 1/2', devKey: 'dk-1' } },
    });
  });

  it('keeps an end user from moving the request to another host', () => {
    // A value standing for one label of the provider's domain must be one DNS label.
    for (const host of ['evil.test', 'evil.test/x?', '127.0.0.1:4701/x?']) {
      const error = thrown(() => buildTokenRequest(bill, templateContextOf('BILL', billCredentials, { host })));
      expect(error.payload).toEqual({ error: 'invalid_token_url', message: 'value for ${connectionConfig.host} must be a DNS label (letters, digits and "-")' });
    }
  });

  it('sends no body with GET', () => {
    const spec = tokenRequestSchema.parse({ method: 'GET', url: 'https://api.test/token?user=${username}', token_path: 'token', expires_in_path: 'ttl' });
    expect(buildTokenRequest(spec, { username: 'a b' })).toEqual({ method: 'GET', url: 'https://api.test/token?user=a%20b', headers: { accept: 'application/json' } });
  });

  it('names the missing placeholder, never a value', () => {
    const error = thrown(() => buildTokenRequest(bill, templateContextOf('BILL', { ...billCredentials, dev_key: undefined }, { host: 'eu' })));
    expect(error.code).toBe('refresh_token_external_error');
    expect(error.payload).toEqual({ error: 'missing_value', message: 'missing value for ${credentials.dev_key}' });
    expect(JSON.stringify(error.payload)).not.toContain('p&ss=word');
  });
});

describe('readTokenAnswer', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  const stated = tokenRequestSchema.parse({ url: 'https://api.test/t', token_path: 'data.token', expires_in_path: 'data.expires_in', expires_in_seconds: 60 });

  it('reads the token and the stated lifetime, else the fixed one', () => {
    expect(readTokenAnswer(stated, { data: { token: 'tok', expires_in: 3600 } }, now)).toEqual({ token: 'tok', expiresAt: '2026-01-01T01:00:00.000Z' });
    expect(readTokenAnswer(stated, { data: { token: 'tok', expires_in: '120' } }, now).expiresAt).toBe('2026-01-01T00:02:00.000Z');
    expect(readTokenAnswer(stated, { data: { token: 'tok' } }, now).expiresAt).toBe('2026-01-01T00:01:00.000Z');
    expect(readTokenAnswer(bill, { response_data: { sessionId: 42 } }, now)).toEqual({ token: '42', expiresAt: '2026-01-01T00:35:00.000Z' });
  });

  it('has no expiry when the provider states none and the entry gives no fixed lifetime', () => {
    const spec = tokenRequestSchema.parse({ url: 'https://api.test/t', token_path: 'token', expires_in_path: 'ttl' });
    expect(readTokenAnswer(spec, { token: 'tok' }, now).expiresAt).toBeUndefined();
  });

  it('treats an answer without a token as a provider error, with its error fields', () => {
    const error = thrown(() => readTokenAnswer(bill, { response_status: 1, response_data: { error_code: 'BDC_1102', error_message: 'Invalid credentials' } }, now));
    expect(error.code).toBe('refresh_token_external_error');
    expect(error.payload).toEqual({ error: 'BDC_1102', message: 'Invalid credentials' });
    expect(thrown(() => readTokenAnswer(stated, { data: { token: '' } }, now)).payload).toEqual({ error: 'no_token' });
  });
});

describe('providerErrorFields', () => {
  it('finds OAuth-style, code/message and nested error fields, and nothing else', () => {
    expect(providerErrorFields({ error: 'invalid_grant', error_description: 'bad password', password: 'x' }, 'token')).toEqual({ error: 'invalid_grant', message: 'bad password' });
    expect(providerErrorFields({ code: 401, message: 'Unauthorized' }, 'token')).toEqual({ error: '401', message: 'Unauthorized' });
    expect(providerErrorFields({ error: { code: 'E1', message: 'nope' } }, 'data.token')).toEqual({ error: 'E1', message: 'nope' });
    expect(providerErrorFields(undefined, 'token')).toEqual({});
    expect(providerErrorFields({ message: 'x'.repeat(500) }, 'token').message).toHaveLength(200);
  });
});
