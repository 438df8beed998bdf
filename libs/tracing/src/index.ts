export { startTracing, tracingRequested, type Tracing, type TracingOptions } from './start-tracing.js';
export {
  SpanKind,
  activeTraceIds,
  extractTraceContext,
  inSpan,
  injectTraceContext,
  markFailed,
  nameServerSpan,
  setSpanAttributes,
  startSpan,
  traceHeaders,
  traceHttpRequests,
  tracingEnabled,
  type OpenSpan,
  type SpanOptions,
} from './spans.js';
export { isAllowedAttribute, safeAttributes } from './safe-attributes.js';
export { SanitizingExporter, sanitizedSpan } from './sanitizing-exporter.js';
