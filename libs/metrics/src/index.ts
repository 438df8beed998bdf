export { METRICS, type LabelsOf, type MetricKind, type MetricName, type MetricSpec } from './catalog.js';
export { CONTENT_TYPE, collectProcessMetrics, counter, gauge, histogram, onScrape, registry, scrape } from './registry.js';
export { Histogram, type HistogramChild } from './histogram.js';
export { busMetrics, type BusMetrics } from './bus-metrics.js';
export { httpRouteMetrics } from './http-metrics.js';
export { answerScrape, isScrape, serveMetrics } from './serve-metrics.js';
