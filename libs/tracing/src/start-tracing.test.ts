import { describe, expect, it } from '@jest/globals';
import { extractTraceContext, inSpan, injectTraceContext, startTracing, traceHeaders, tracingEnabled, tracingRequested } from './index.js';

describe('startTracing', () => {
  it('is on only with an OTLP endpoint, and off again with OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });

  it('registers nothing without an endpoint: helpers call straight through and add no header', async () => {
    const tracing = await startTracing({ service: 'test', instance: 'i-1', env: {} });
    expect(tracing.enabled).toBe(false);
    expect(tracingEnabled()).toBe(false);
    expect(await inSpan('work', {}, async () => 42)).toBe(42);
    const headers: string[] = [];
    injectTraceContext((key) => headers.push(key));
    expect(headers).toEqual([]);
    expect(traceHeaders()).toBeUndefined();
    expect(extractTraceContext(() => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')).toBeUndefined();
  });

  it('refuses a protocol it does not speak', async () => {
    await expect(startTracing({ service: 'test', instance: 'i-1', env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' } })).rejects.toThrow(/http\/protobuf, http\/json/);
  });
});
