import { describe, expect, it } from '@jest/globals';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { safeAttributes } from './safe-attributes.js';
import { SanitizingExporter } from './sanitizing-exporter.js';

const CANARY = 'sk_live_canary_0123456789abcdefghijklmnopqrstuvwxyz';

describe('safeAttributes', () => {
  it('keeps only allowed keys', () => {
    expect(
      safeAttributes({
        'http.request.method': 'GET',
        'http.request.header.authorization': `Bearer ${CANARY}`,
        'url.full': `https://api.example.test/v1?api_key=${CANARY}`,
        'url.query': `api_key=${CANARY}`,
        'db.statement': `{"token":"${CANARY}"}`,
        access_token: CANARY,
      }),
    ).toEqual({ 'http.request.method': 'GET' });
  });

  it('drops a credential-looking value even under an allowed key', () => {
    expect(safeAttributes({ 'error.type': `Bearer ${CANARY}`, 'latchkey.provider': CANARY, 'http.route': 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.x' })).toEqual({});
  });

  it('keeps long route templates', () => {
    const route = '/environments/:name/webhooks/inbound/attempts/by-connection';
    expect(safeAttributes({ 'http.route': route })).toEqual({ 'http.route': route });
  });

  it('keeps the host of a server address only, and the path of a route only', () => {
    expect(safeAttributes({ 'server.address': `https://user:${CANARY}@api.example.test:8443/v1?key=${CANARY}`, 'http.route': '/proxy/*?key=abc' })).toEqual({
      'server.address': 'api.example.test',
      'http.route': '/proxy/*',
    });
  });
});

describe('SanitizingExporter', () => {
  it('exports no credential, whatever the instrumentation set on the span', async () => {
    const memory = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new SanitizingExporter(memory) })] });
    const span = provider.getTracer('test').startSpan('call', { kind: SpanKind.CLIENT, attributes: { 'server.address': 'api.example.test', authorization: `Bearer ${CANARY}` } });
    span.setAttribute('http.request.header.authorization', CANARY);
    span.setAttribute('url.full', `https://api.example.test/?token=${CANARY}`);
    span.addEvent(`refresh failed: ${CANARY}`, { 'exception.message': CANARY, 'exception.type': 'invalid_grant' });
    span.recordException(new Error(`upstream said ${CANARY}`));
    span.setStatus({ code: 2, message: `provider answered ${CANARY}` });
    span.end();
    await provider.forceFlush();
    const [exported] = memory.getFinishedSpans();
    expect(exported?.attributes).toEqual({ 'server.address': 'api.example.test' });
    expect(exported?.events.map((event) => event.name)).toEqual(['event', 'exception']);
    expect(JSON.stringify({ a: exported?.attributes, e: exported?.events, s: exported?.status, n: exported?.name })).not.toContain(CANARY);
  });
});
