import { counter, histogram, type HistogramChild } from '@latchkey/metrics';

/**
 * The proxy's metrics. `provider` is the catalog provider key of the connection (bounded by the
 * catalog the operator deploys), never the integration's unique key, which customers choose
 * freely; the method is one of the standard ones or `_OTHER`.
 */
const duration = histogram('latchkey_proxy_upstream_duration_seconds');
const retries = counter('latchkey_proxy_retries_total');
const refused = counter('latchkey_proxy_refused_addresses_total');

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'];

/** Children by provider, method and status class: found with map lookups, no key built per call. */
const children = new Map<string, Map<string, Map<string, HistogramChild>>>();

/** One attempt at the provider: its status (0 when none came back) and how long it took. */
export function observeUpstream(provider: string, method: string, status: number, seconds: number): void {
  const verb = METHODS.has(method) ? method : '_OTHER';
  const statusClass = (status > 0 ? CLASSES[Math.floor(status / 100) - 1] : undefined) ?? 'error';
  let byMethod = children.get(provider);
  if (!byMethod) children.set(provider, (byMethod = new Map()));
  let byClass = byMethod.get(verb);
  if (!byClass) byMethod.set(verb, (byClass = new Map()));
  let child = byClass.get(statusClass);
  if (!child) {
    child = duration.labels({ provider, method: verb, status_class: statusClass });
    byClass.set(statusClass, child);
  }
  child.observe(seconds);
}

export const countRetry = (provider: string): void => retries.inc({ provider });

/**
 * An address the policy refused, by the kind of range its reason names (private, loopback,
 * link-local, cloud metadata, ...): never the address itself.
 */
export function countRefusedAddress(reason: string): void {
  const range = /cloud metadata/.test(reason) ? 'cloud_metadata' : (/([a-z-]+) range/.exec(reason)?.[1]?.replace(/-/g, '_') ?? 'other');
  refused.inc({ range });
}
