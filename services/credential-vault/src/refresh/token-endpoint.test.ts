import { afterAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { createAddressPolicy, createHttpClient } from '@latchkey/net';
import { providerError } from './fresh-credentials.js';
import { END_USER_NOT_ALLOWED, callTokenEndpoint, failedForNow, forEndUser } from './token-endpoint.js';

// IP-literal hosts: the policy refuses them before any lookup or socket, so nothing leaves.
const http = createHttpClient({ policy: createAddressPolicy({ allowCidrs: [] }) });
afterAll(() => http.close());

async function refusedAt(url: string): Promise<AppError> {
  const error = await callTokenEndpoint(http, url, { form: { grant_type: 'authorization_code' }, headers: {}, timeoutMs: 1_000 }).catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

function capturingLogger() {
  const lines: string[] = [];
  const logger = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void lines.push(String(line))) }) });
  return { logger, lines };
}

describe('a token endpoint at an address the policy refuses', () => {
  it("tells the customer's backend the range, as the proxy does", async () => {
    expect((await refusedAt('http://10.0.0.1/token')).message).toContain('private range');
  });

  it('tells an end user one message whatever the reason, and the log why', async () => {
    const { logger, lines } = capturingLogger();
    // A NAT64 address's reason names the IPv4 address it carries.
    const urls = ['http://10.0.0.1/token', 'http://127.0.0.2:8080/token', 'http://169.254.169.254/token', 'http://[64:ff9b::a00:1]/token'];
    const told = [];
    for (const url of urls) told.push(forEndUser(await refusedAt(url), logger) as AppError);
    for (const error of told) expect(error).toMatchObject({ code: 'upstream_not_allowed', message: END_USER_NOT_ALLOWED, payload: undefined });
    expect(END_USER_NOT_ALLOWED).not.toMatch(/range|loopback|private|metadata|\d+\.\d+/);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.join('')).toContain('NAT64 address of 10.0.0.1: private range');
    expect(lines.join('')).toContain('cloud metadata address');
  });

  it("leaves every other error as it is: the provider's refusal or an unreachable endpoint says what it says", () => {
    const { logger } = capturingLogger();
    const unreachable = new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", { payload: { error: 'unreachable' } });
    expect(forEndUser(unreachable, logger)).toBe(unreachable);
  });
});

describe('a token endpoint that failed', () => {
  const unreachable = (reason: string) => new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", { payload: { error: 'unreachable', reason } });

  it('failed for now when it was not reached, or answered 5xx, 429 or 408', () => {
    for (const reason of ['timeout', 'connection_refused', 'connection_reset', 'dns_not_found', 'network_error']) expect(failedForNow(unreachable(reason))).toBe(true);
    for (const status of [500, 502, 503, 504, 429, 408]) expect(failedForNow(providerError(status, '{"error":"temporarily_unavailable"}'))).toBe(true);
    // A token-request type's answer carries its status the same way.
    expect(failedForNow(new AppError('refresh_token_external_error', 'The provider refused the token request: http_503', { payload: { status: 503, error: 'http_503' } }))).toBe(true);
  });

  it('failed for good when the provider refused, or the request cannot be made', () => {
    for (const status of [400, 401, 403, 404]) expect(failedForNow(providerError(status, '{"error":"invalid_grant"}'))).toBe(false);
    expect(failedForNow(unreachable('invalid_url'))).toBe(false);
    // A token request's refusal keeps the provider's `error` field, whatever it says.
    expect(failedForNow(new AppError('refresh_token_external_error', 'The provider refused the token request: unreachable', { payload: { status: 400, error: 'unreachable' } }))).toBe(false);
    expect(failedForNow(new AppError('refresh_token_external_error', 'The provider answered without an installation token', { payload: { status: 200, error: 'no_token' } }))).toBe(false);
    expect(failedForNow(new AppError('refresh_token_external_error', 'The connection has no refresh token', { payload: { error: 'no_refresh_token' } }))).toBe(false);
    expect(failedForNow(new AppError('upstream_not_allowed', 'The provider\'s endpoint is at an address that is not allowed'))).toBe(false);
    expect(failedForNow(new AppError('service_unavailable', 'The database is unavailable'))).toBe(false);
  });
});
