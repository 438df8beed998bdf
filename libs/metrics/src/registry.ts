import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { METRICS, type LabelsOf, type MetricName } from './catalog.js';
import { Histogram } from './histogram.js';

/**
 * The one registry of a process: what `/metrics` serves. Metrics are made on first use, so a
 * service exports the metrics of what it does (the vault has no proxy metrics), plus the
 * default process metrics (CPU, memory, event-loop lag, GC).
 */
export const registry = new Registry();
let defaultsCollected = false;

/**
 * How often the event-loop lag is sampled. prom-client's default, 10 ms, woke an idle service
 * about 200 times a second, half of what it spent idle here (1.1 to 1.2 % of a core, by /proc;
 * 0.5 to 0.8 % now); a sample every 100 ms still catches any stall long enough to matter.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** Adds Node's process metrics (`process_*`, `nodejs_*`) once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}

/** The Prometheus text exposition of everything registered. */
export function scrape(): Promise<string> {
  return registry.metrics();
}

export const CONTENT_TYPE = registry.contentType;

type Made = Counter | Gauge | Histogram<string>;
const made = new Map<MetricName, Made>();
type Sampler = (gauge: Gauge<string>) => Promise<void> | void;
const samplers = new Map<MetricName, Sampler[]>();

function make(name: MetricName): Made {
  const existing = made.get(name);
  if (existing) return existing;
  const spec = METRICS[name];
  const common = { name, help: spec.help, labelNames: [...spec.labels], registers: [registry] };
  const metric =
    spec.kind === 'counter'
      ? new Counter(common)
      : spec.kind === 'gauge'
        ? new Gauge({
            ...common,
            // Values read at scrape time (a consumer's backlog), from whoever registered a sampler.
            async collect() {
              for (const sample of samplers.get(name) ?? []) await sample(this);
            },
          })
        : new Histogram(name, spec.help, spec.labels, 'buckets' in spec ? spec.buckets : [], registry);
  made.set(name, metric);
  return metric;
}

type CounterName = { [N in MetricName]: (typeof METRICS)[N]['kind'] extends 'counter' ? N : never }[MetricName];
type GaugeName = { [N in MetricName]: (typeof METRICS)[N]['kind'] extends 'gauge' ? N : never }[MetricName];
type HistogramName = { [N in MetricName]: (typeof METRICS)[N]['kind'] extends 'histogram' ? N : never }[MetricName];

/** A counter of the catalog. Its series appear at 0 before the first increment if it has no labels. */
export function counter<N extends CounterName>(name: N): Counter<LabelsOf<N>> {
  return make(name) as Counter<LabelsOf<N>>;
}

export function gauge<N extends GaugeName>(name: N): Gauge<LabelsOf<N>> {
  return make(name) as Gauge<LabelsOf<N>>;
}

export function histogram<N extends HistogramName>(name: N): Histogram<LabelsOf<N>> {
  return make(name) as Histogram<LabelsOf<N>>;
}

/**
 * Sets a gauge's values each time it is scraped (from a count kept elsewhere, or asked of NATS).
 * A sampler that throws keeps the gauge's last values: a scrape never fails for it.
 */
export function onScrape<N extends GaugeName>(name: N, sampler: (gauge: Gauge<LabelsOf<N>>) => Promise<void> | void): void {
  gauge(name);
  const safe: Sampler = async (target) => {
    try {
      await sampler(target as Gauge<LabelsOf<N>>);
    } catch {
      // Last values stay.
    }
  };
  samplers.set(name, [...(samplers.get(name) ?? []), safe]);
}
