import type { HistogramChild } from './histogram.js';
import { histogram } from './registry.js';

/**
 * The recorder of one route: `http_server_request_duration_seconds` with its template (never the
 * path as sent, which carries ids) and method, one child per status code met.
 */
export function httpRouteMetrics(route: string, method: string): (status: number, seconds: number) => void {
  const metric = histogram('http_server_request_duration_seconds');
  const byStatus = new Map<number, HistogramChild>();
  const upper = method.toUpperCase();
  return (status, seconds) => {
    let child = byStatus.get(status);
    if (!child) {
      child = metric.labels({ http_route: route, http_request_method: upper, http_response_status_code: String(status) });
      byStatus.set(status, child);
    }
    child.observe(seconds);
  };
}
