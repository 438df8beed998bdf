import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { useTraceIds } from '@latchkey/logger';
import { batchOptionsFromEnv, samplerFromEnv } from './sampler-from-env.js';
import { SanitizingExporter } from './sanitizing-exporter.js';
import { activeTraceIds, useTracer } from './spans.js';

export interface TracingOptions {
  /** The service name: `service.name` unless OTEL_SERVICE_NAME says otherwise. */
  service: string;
  /** This process's id: `service.instance.id`. */
  instance: string;
  env?: NodeJS.ProcessEnv;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/**
 * Whether the standard variables ask for traces: an OTLP endpoint (all signals or traces), and
 * neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return false;
  if (env['OTEL_TRACES_EXPORTER']?.trim().toLowerCase() === 'none') return false;
  return Boolean(env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim() || env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim());
}

/**
 * Starts the OpenTelemetry SDK from the standard `OTEL_*` variables, before any connection is
 * made: OTLP over HTTP (protobuf or JSON), W3C trace context, a batch span processor, and an
 * exporter that drops every attribute not on the allowlist. Without an endpoint nothing is
 * registered and every helper of this library calls straight through.
 */
let started: Tracing | undefined;

export function startTracing(options: TracingOptions): Tracing {
  const env = options.env ?? process.env;
  if (!tracingRequested(env)) return { enabled: false, shutdown: async () => undefined };
  // One provider per process: a second service in the same process (tests) shares the first's.
  if (started !== undefined) return started;
  const protocol = (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? 'http/protobuf').trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL must be one of ${PROTOCOLS.join(', ')} (got ${protocol})`);
  }
  // The exporters read the endpoint, headers, timeout and compression from the OTEL_* variables.
  const exporter = protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter();
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
  useTracer(provider.getTracer('latchkey'));
  useTraceIds(activeTraceIds);
  let stopped: Promise<void> | undefined;
  started = {
    enabled: true,
    shutdown: () =>
      (stopped ??= (async () => {
        useTracer(undefined);
        useTraceIds(undefined);
        await provider.shutdown();
      })()),
  };
  return started;
}
