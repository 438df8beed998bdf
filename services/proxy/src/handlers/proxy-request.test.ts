import { describe, expect, it } from '@jest/globals';
import { createOperationLog, operationsOfPages } from '@latchkey/bus';
import { recordedOperations, type OperationPage, type ProxyRequestMeta } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { proxyMetaFixture } from '../domain/meta-fixture.js';
import { proxyOperationFields } from './proxy-request.js';

const STARTED = Date.UTC(2026, 10, 28, 17, 59, 59, 997);

const meta = (overrides: Partial<ProxyRequestMeta> = {}) =>
  proxyMetaFixture('repos/acme/app/issues', { provider_config_key: 'github', query: 'state=open&token=secret', headers: [['Accept', 'application/json']], ...overrides });

/** The entry as the gateway reads it back: the recorder's id and the fields, checked by the proxy's schema. */
const entry = (fields: string) => recordedOperations.proxy.parse(JSON.parse(`{"id":"x",${fields}}`));

describe("a proxied call's operation", () => {
  it('is the JSON of the entry the proxy schema takes: no query, no header', () => {
    expect(entry(proxyOperationFields(meta({ request_id: 'req-7' }), STARTED, STARTED + 12, { upstreamStatus: 200 }))).toEqual({
      id: 'x',
      type: 'proxy',
      environment_id: 'env_0123456789abcdef0123',
      status: 'success',
      started_at: '2026-11-28T17:59:59.997Z',
      duration_ms: 12,
      integration_id: 'github',
      connection_id: 'conn-1',
      request_id: 'req-7',
      proxy: { method: 'GET', path: '/repos/acme/app/issues', upstream_status: 200 },
    });
  });

  it('says a failure: an upstream 4xx or 5xx, or an error with its coded message', () => {
    expect(entry(proxyOperationFields(meta(), STARTED, STARTED, { upstreamStatus: 503 }))).toMatchObject({ status: 'failure', proxy: { upstream_status: 503 } });
    const failed = entry(proxyOperationFields(meta(), STARTED, STARTED + 5, { error: new AppError('upstream_timeout', 'The provider did not answer in time') }));
    expect(failed).toMatchObject({ status: 'failure', error: { code: 'upstream_timeout', message: 'The provider did not answer in time' } });
    expect(failed.proxy).toEqual({ method: 'GET', path: '/repos/acme/app/issues' });
  });

  it('keeps the trace id of a forwarded traceparent', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(entry(proxyOperationFields(meta({ headers: [['TraceParent', traceparent]] }), STARTED, STARTED, {})).trace_id).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(entry(proxyOperationFields(meta({ traceparent }), STARTED, STARTED, {})).trace_id).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('escapes what callers choose: quotes, backslashes, control characters and any Unicode in ids and paths', () => {
    const awkward = 'a"b\\c\u0000d\n\u2028é😀</script>';
    const operation = entry(proxyOperationFields(meta({ connection_id: awkward, provider_config_key: awkward, path: awkward, request_id: awkward }), STARTED, STARTED, {}));
    expect(operation).toMatchObject({ connection_id: awkward, integration_id: awkward, request_id: awkward, proxy: { path: `/${awkward}` } });
  });

  it('writes the environment, integration, connection and method of each call, however calls alternate', () => {
    const calls = ['a', 'a', 'b', 'a', 'b', 'b'].map((name) =>
      entry(proxyOperationFields(meta({ environment_id: `env_${name}`, provider_config_key: `crm-${name}`, connection_id: `conn-${name}`, method: name === 'a' ? 'GET' : 'POST' }), STARTED, STARTED, {})),
    );
    expect(calls.map((operation) => [operation.environment_id, operation.integration_id, operation.connection_id, operation.proxy?.method].join(' '))).toEqual([
      'env_a crm-a conn-a GET',
      'env_a crm-a conn-a GET',
      'env_b crm-b conn-b POST',
      'env_a crm-a conn-a GET',
      'env_b crm-b conn-b POST',
      'env_b crm-b conn-b POST',
    ]);
  });

  it('bounds a long path and a long error message as the schema does', () => {
    const operation = entry(proxyOperationFields(meta({ path: 'p'.repeat(5000) }), STARTED, STARTED, { error: new AppError('internal_error', 'm'.repeat(5000)) }));
    expect(operation.proxy?.path).toHaveLength(2048);
    expect(operation.error?.message).toHaveLength(1000);
  });

  it('reaches a page as one valid entry, with the recorder’s id', async () => {
    const sent: OperationPage[][] = [];
    const log = createOperationLog({ logger: { warn: () => undefined }, flushMs: 60_000, send: async (pages) => void sent.push(pages) });
    log.recordFields('env_0123456789abcdef0123', STARTED, proxyOperationFields(meta(), STARTED, STARTED + 1, { upstreamStatus: 204 }));
    await log.flush();
    const [operation] = operationsOfPages(sent[0]!);
    expect(recordedOperations.proxy.parse(operation)).toMatchObject({ type: 'proxy', proxy: { upstream_status: 204 } });
    expect(operation!.id).toMatch(/^[0-9a-z]{9}/);
  });
});
