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
  traceHeaders,
  traceHttpRequests,
  tracingEnabled,
  type SpanOptions,
} from './spans.js';
export { isAllowedAttribute, safeAttributes } from './safe-attributes.js';
export { SanitizingExporter, sanitizedSpan } from './sanitizing-exporter.js';
