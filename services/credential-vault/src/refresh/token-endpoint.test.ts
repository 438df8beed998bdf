import { afterAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { createAddressPolicy, createHttpClient, type ResolveAll } from '@latchkey/net';
import { providerError } from './fresh-credentials.js';
import { END_USER_UNREACHABLE, callTokenEndpoint, failedForNow, forEndUser } from './token-endpoint.js';

/**
 * A stand-in DNS: `*.internal.test` names resolve to a private address, every other name to
 * nothing. IP-literal hosts and names the policy refuses are refused before any socket, and a
 * name that does not resolve never gets one, so nothing leaves.
 */
const resolve: ResolveAll = (hostname, _options, callback) => {
  if (hostname.endsWith('.internal.test')) callback(null, [{ address: '10.1.2.3', family: 4 }]);
  else callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
};
const http = createHttpClient({ policy: createAddressPolicy({ allowCidrs: [] }), resolve });
afterAll(() => http.close());

async function failedAt(url: string): Promise<AppError> {
  const error = await callTokenEndpoint(http, url, { form: { grant_type: 'authorization_code' }, headers: {}, timeoutMs: 1_000 }).catch((thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

/** A token endpoint that was not reached, as `callTokenEndpoint` says it. */
const unreachable = (reason: string) => new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", { payload: { error: 'unreachable', reason } });

/** Everything of an error that reaches the end user: its wire body and status. */
const heard = (error: unknown) => {
  expect(error).toBeInstanceOf(AppError);
  return { ...(error as AppError).toBody(), status: (error as AppError).status };
};

function capturingLogger() {
  const lines: string[] = [];
  const logger = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void lines.push(String(line))) }) });
  return { logger, lines };
}

describe('a token endpoint at an address the policy refuses', () => {
  it("tells the customer's backend the range, as the proxy does", async () => {
    expect((await failedAt('http://10.0.0.1/token')).message).toContain('private range');
  });

  it("keeps the range for the customer's backend when the name resolved to it", async () => {
    const refused = await failedAt('http://sso.internal.test/token');
    expect(refused).toMatchObject({ code: 'upstream_not_allowed', status: 400 });
    expect(refused.message).toContain('private range');
  });
});

describe('a token endpoint as an end user hears of it', () => {
  // The end user may have typed the host. A refused address and one that could not be reached
  // must read the same, or the answers map our internal DNS: which names exist, and which of
  // them resolve to private ranges.
  const refusedUrls = ['http://10.0.0.1/token', 'http://127.0.0.2:8080/token', 'http://169.254.169.254/token', 'http://[64:ff9b::a00:1]/token', 'http://sso.internal.test/token?code=a-code'];

  it('is one answer for a refused address and for one that was not reached, whatever the reason, and the log says why', async () => {
    const { logger, lines } = capturingLogger();
    const notFound = await failedAt('http://nowhere.invalid/token?code=a-code');
    expect(notFound.payload).toEqual({ error: 'unreachable', reason: 'dns_not_found' });
    const errors = [...(await Promise.all(refusedUrls.map(failedAt))), notFound, unreachable('connection_refused'), unreachable('timeout'), unreachable('invalid_url')];
    const told = errors.map((error) => heard(forEndUser(error, logger)));
    for (const answer of told) {
      expect(answer).toEqual({ code: 'refresh_token_external_error', status: 424, message: END_USER_UNREACHABLE, payload: { error: 'unreachable' } });
    }
    expect(END_USER_UNREACHABLE).not.toMatch(/range|loopback|private|metadata|allowed|resolve|\d+\.\d+/);
    await new Promise((resolve) => setImmediate(resolve));
    const log = lines.join('');
    expect(log).toContain('NAT64 address of 10.0.0.1: private range');
    expect(log).toContain('cloud metadata address');
    expect(log).toContain('sso.internal.test');
    expect(log).toContain('dns_not_found');
    expect(log).toContain('connection_refused');
    // The host is the operator's to see; the path and query may carry a code or a secret.
    expect(log).not.toMatch(/\/token|a-code/);
  });

  it("passes the provider's answers as they are, even one whose own error reads unreachable", () => {
    const { logger } = capturingLogger();
    const answers = [
      providerError(400, '{"error":"invalid_grant"}'),
      providerError(503, '{"error":"temporarily_unavailable"}'),
      new AppError('refresh_token_external_error', 'The provider refused the token request: unreachable', { payload: { status: 400, error: 'unreachable' } }),
      new AppError('invalid_body', 'connection_config.host is needed by the provider\'s URL'),
    ];
    for (const answer of answers) expect(forEndUser(answer, logger)).toBe(answer);
  });
});

describe('a token endpoint that failed', () => {
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
