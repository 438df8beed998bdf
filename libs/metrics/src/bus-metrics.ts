import type { Histogram, HistogramChild } from './histogram.js';
import { counter, histogram } from './registry.js';

/** What the bus reports (see `BusObserver` in @latchkey/bus), as Prometheus histograms and counters. */
export interface BusMetrics {
  requested(subject: string, seconds: number, errorCode: string | undefined): void;
  served(subject: string, seconds: number, errorCode: string | undefined): void;
  consumed(subject: string, seconds: number, errorCode: string | undefined): void;
  operationsSent(count: number): void;
  operationsDropped(reason: string, count: number): void;
}

/** Why the operations log drops operations (`OperationDropReason` in @latchkey/bus). */
const DROP_REASONS = ['buffer_full', 'send_failed', 'invalid_environment'] as const;

/**
 * Children kept per subject template and error code (both bounded: contract subjects and the
 * error table), so observing costs two map lookups.
 */
function observer(metric: Histogram<string>, operation: string) {
  const bySubject = new Map<string, Map<string, HistogramChild>>();
  return (subject: string, seconds: number, errorCode: string | undefined) => {
    let byError = bySubject.get(subject);
    if (!byError) bySubject.set(subject, (byError = new Map()));
    const error = errorCode ?? '';
    let child = byError.get(error);
    if (!child) {
      child = metric.labels({ messaging_system: 'nats', messaging_operation_name: operation, messaging_destination_name: subject, error_type: error });
      byError.set(error, child);
    }
    child.observe(seconds);
  };
}

/**
 * The operations log's counters. Each reason's series is there at 0 from the start, so an alert
 * on its increase sees the first drops too.
 */
function operationsLogMetrics(): Pick<BusMetrics, 'operationsSent' | 'operationsDropped'> {
  const sent = counter('latchkey_operations_log_sent_total');
  const dropped = counter('latchkey_operations_log_dropped_total');
  for (const reason of DROP_REASONS) dropped.inc({ reason }, 0);
  return {
    operationsSent: (count) => sent.inc(count),
    operationsDropped: (reason, count) => dropped.inc({ reason }, count),
  };
}

export function busMetrics(): BusMetrics {
  const client = histogram('messaging_client_operation_duration_seconds');
  const processed = histogram('messaging_process_duration_seconds');
  return { requested: observer(client, 'send'), served: observer(processed, 'process'), consumed: observer(processed, 'process'), ...operationsLogMetrics() };
}
