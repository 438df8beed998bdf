import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { batchOptionsFromEnv, samplerFromEnv } from './sampler-from-env.js';
import { SanitizingExporter } from './sanitizing-exporter.js';

/**
 * The OpenTelemetry SDK, registered globally: loaded only when tracing is on (`startTracing`
 * imports this module then), so a service without an endpoint never pays for loading it.
 */
export function registerSdk(options: { service: string; instance: string; protocol: 'http/protobuf' | 'http/json'; env: NodeJS.ProcessEnv }): { tracer: Tracer; shutdown(): Promise<void> } {
  const { env } = options;
  // The exporters read the endpoint, headers, timeout and compression from the OTEL_* variables.
  const exporter = options.protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter();
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': options.service, 'service.instance.id': options.instance }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerFromEnv(env),
    spanProcessors: [new BatchSpanProcessor({ exporter: new SanitizingExporter(exporter), ...batchOptionsFromEnv(env) })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return { tracer: provider.getTracer('latchkey'), shutdown: () => provider.shutdown() };
}
