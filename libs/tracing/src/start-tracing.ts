import { useTraceIds } from '@latchkey/logger';
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
type Protocol = (typeof PROTOCOLS)[number];

/**
 * Whether the standard variables ask for traces: an OTLP endpoint (all signals or traces), and
 * neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return false;
  if (env['OTEL_TRACES_EXPORTER']?.trim().toLowerCase() === 'none') return false;
  return Boolean(env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim() || env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim());
}

let started: Promise<Tracing> | undefined;

/**
 * Starts the OpenTelemetry SDK from the standard `OTEL_*` variables, before any connection is
 * made: OTLP over HTTP (protobuf or JSON), W3C trace context, a batch span processor, and an
 * exporter that drops every attribute not on the allowlist. Without an endpoint the SDK is not
 * even loaded, nothing is registered, and every helper of this library calls straight through.
 */
export function startTracing(options: TracingOptions): Promise<Tracing> {
  const env = options.env ?? process.env;
  if (!tracingRequested(env)) return Promise.resolve({ enabled: false, shutdown: async () => undefined });
  const protocol = (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? 'http/protobuf').trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    return Promise.reject(new Error(`OTEL_EXPORTER_OTLP_PROTOCOL must be one of ${PROTOCOLS.join(', ')} (got ${protocol})`));
  }
  // One provider per process: a second service in the same process (tests) shares the first's.
  return (started ??= (async () => {
    const { registerSdk } = await import('./sdk.js');
    const sdk = registerSdk({ service: options.service, instance: options.instance, protocol: protocol as Protocol, env });
    useTracer(sdk.tracer);
    useTraceIds(activeTraceIds);
    let stopped: Promise<void> | undefined;
    return {
      enabled: true,
      shutdown: () =>
        (stopped ??= (async () => {
          useTracer(undefined);
          useTraceIds(undefined);
          await sdk.shutdown();
        })()),
    };
  })());
}
