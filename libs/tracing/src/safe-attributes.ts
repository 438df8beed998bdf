import type { Attributes, AttributeValue } from '@opentelemetry/api';

/**
 * The only attribute keys a span may carry. Anything else (a header, a query, a body, a value a
 * caller chose the key of) is dropped before export, so a credential cannot reach a span by a
 * new attribute nobody reviewed: adding a key here is the review.
 */
const ALLOWED_KEYS = new Set([
  'http.request.method',
  'http.response.status_code',
  'http.route',
  'url.scheme',
  'server.address',
  'server.port',
  'messaging.system',
  'messaging.operation.type',
  'messaging.destination.name',
  'messaging.consumer.group.name',
  'db.system.name',
  'db.operation.name',
  'db.collection.name',
  'db.namespace',
  'error.type',
  'exception.type',
  'latchkey.provider',
  'latchkey.connection_id',
  'latchkey.environment_id',
  'latchkey.attempt',
  'latchkey.function',
  'latchkey.webhook_endpoint_id',
  'latchkey.outcome',
]);

/** Keys whose value is a host name: no user info, port, path or query may ride along. */
const HOST_KEYS = new Set(['server.address']);

/**
 * Values that look like a credential whatever their key: schemes, JWTs, long opaque tokens (a
 * route template's slashes and colons break a run, so long templates stay).
 */
const CREDENTIAL_VALUE = /(^|\s)(bearer|basic|token|digest)\s+\S|eyJ[A-Za-z0-9_-]{8,}\.|[A-Za-z0-9_\-+=]{40,}/i;

function safeValue(key: string, value: AttributeValue | undefined): AttributeValue | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' || typeof value === 'boolean') return value;
  if (typeof value !== 'string') return undefined;
  if (HOST_KEYS.has(key)) {
    const host = value.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/^[^@/]*@/, '').split(/[/?#:]/)[0] ?? '';
    return host === '' ? undefined : host;
  }
  // Paths and subjects never carry a query; a template (`/connections/:id`) has none anyway.
  const plain = key === 'http.route' ? (value.split(/[?#]/)[0] ?? '') : value;
  if (plain.length > 256 || CREDENTIAL_VALUE.test(plain)) return undefined;
  return plain;
}

export function isAllowedAttribute(key: string): boolean {
  return ALLOWED_KEYS.has(key);
}

/** The attributes of `attributes` that may be exported: allowed keys with harmless values. */
export function safeAttributes(attributes: Attributes | undefined): Attributes {
  const out: Attributes = {};
  if (!attributes) return out;
  for (const [key, value] of Object.entries(attributes)) {
    if (!ALLOWED_KEYS.has(key)) continue;
    const safe = safeValue(key, value);
    if (safe !== undefined) out[key] = safe;
  }
  return out;
}
