import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler } from '@opentelemetry/sdk-trace';

/**
 * The sampler the standard `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name (the SDK's
 * 3.x line left reading them to the caller). Default: `parentbased_always_on`.
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler {
  const name = (env['OTEL_TRACES_SAMPLER'] ?? 'parentbased_always_on').trim().toLowerCase();
  const arg = Number(env['OTEL_TRACES_SAMPLER_ARG']);
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 && env['OTEL_TRACES_SAMPLER_ARG']?.trim() ? arg : 1;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The standard `OTEL_BSP_*` settings of the batch span processor that are set to a number. */
export function batchOptionsFromEnv(env: NodeJS.ProcessEnv): { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number; exportTimeoutMillis?: number } {
  const read = (name: string) => {
    const value = Number(env[name]);
    return env[name]?.trim() && Number.isFinite(value) && value > 0 ? value : undefined;
  };
  const entries = {
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY'),
    maxQueueSize: read('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    exportTimeoutMillis: read('OTEL_BSP_EXPORT_TIMEOUT'),
  };
  return Object.fromEntries(Object.entries(entries).filter(([, value]) => value !== undefined));
}
