import type { IncomingHttpHeaders, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';

export { SpanKind } from '@opentelemetry/api';

/**
 * The tracer while tracing is on, else undefined. Every helper below checks it first and, when
 * tracing is off, calls straight through: no span, no context, no header is made on the hot path.
 */
let tracer: Tracer | undefined;

export function useTracer(next: Tracer | undefined): void {
  tracer = next;
}

/** True while spans are recorded and exported (`startTracing` found an endpoint). */
export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The context to continue (one extracted from a message); the active one by default. */
  parent?: Context | undefined;
}

/**
 * Runs `fn` inside a new active span that ends when `fn` settles; a failure marks it an error
 * with the error's code as `error.type` (never its message, which may quote a provider).
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: () => Promise<T>): Promise<T> {
  if (tracer === undefined) return fn();
  const attributes = options.attributes ?? {};
  return tracer.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes }, options.parent ?? context.active(), async (span) => {
    try {
      return await fn();
    } catch (error) {
      markFailed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** A span started and ended by events rather than around one call (a database command). */
export interface OpenSpan {
  end(errorType?: string): void;
}

/**
 * Starts a span, child of the active one, that `end` closes; undefined when tracing is off or no
 * span is active (background work such as index builds and sweeps makes no trace of its own).
 */
export function startSpan(name: string, kind: SpanKind, attributes: Attributes): OpenSpan | undefined {
  if (tracer === undefined || trace.getActiveSpan() === undefined) return undefined;
  const span = tracer.startSpan(name, { kind, attributes }, context.active());
  return {
    end: (errorType) => {
      if (errorType !== undefined) {
        span.setAttribute('error.type', errorType);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

export function markFailed(span: Span, error: unknown): void {
  const code = (error as { code?: unknown } | undefined)?.code;
  span.setAttribute('error.type', typeof code === 'string' && /^[a-z0-9_]{1,64}$/i.test(code) ? code : error instanceof Error ? error.name : 'error');
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** Adds attributes to the active span (the exporter keeps only the allowed ones). */
export function setSpanAttributes(attributes: Attributes): void {
  if (tracer === undefined) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** Names the active HTTP server span after the route template that matched (`GET /connections/:id`). */
export function nameServerSpan(method: string, route: string): void {
  if (tracer === undefined) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`${method.toUpperCase()} ${route}`);
  span.setAttribute('http.route', route);
}

/** Writes the active trace context (`traceparent`, `tracestate`) with `set`; nothing when off. */
export function injectTraceContext(set: (key: string, value: string) => void): void {
  if (tracer === undefined) return;
  propagation.inject(context.active(), undefined, { set: (_carrier, key, value) => set(key, value) });
}

/** The active trace context as W3C headers, or undefined when tracing is off or none is active. */
export function traceHeaders(): { traceparent: string; tracestate?: string } | undefined {
  if (tracer === undefined) return undefined;
  const out: Record<string, string> = {};
  injectTraceContext((key, value) => (out[key] = value));
  const traceparent = out['traceparent'];
  if (traceparent === undefined) return undefined;
  return out['tracestate'] === undefined ? { traceparent } : { traceparent, tracestate: out['tracestate'] };
}

/** The trace context a message carried, read with `get`; undefined when off. */
export function extractTraceContext(get: (key: string) => string | undefined): Context | undefined {
  if (tracer === undefined) return undefined;
  return propagation.extract(ROOT_CONTEXT, undefined, {
    get: (_carrier, key) => get(key),
    keys: () => ['traceparent', 'tracestate'],
  });
}

/** Trace and span id of the active span, for log lines. */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  if (tracer === undefined) return undefined;
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

function headerOf(headers: IncomingHttpHeaders, key: string): string | undefined {
  const value = headers[key];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * An HTTP server's request listener wrapped in a server span per request, continuing the
 * caller's `traceparent`; the route names it (`nameServerSpan`), the status ends it. When
 * tracing is off, `listener` itself is returned.
 */
export function traceHttpRequests(listener: RequestListener): RequestListener {
  const active = tracer;
  if (active === undefined) return listener;
  return (req: IncomingMessage, res: ServerResponse) => {
    const parent = propagation.extract(ROOT_CONTEXT, undefined, { get: (_carrier, key) => headerOf(req.headers, key), keys: () => ['traceparent', 'tracestate'] });
    const method = req.method ?? 'GET';
    const span = active.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
    res.once('close', () => {
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), () => listener(req, res));
  };
}
