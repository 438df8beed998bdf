import { connectionLookupSchema, type WebhookRoutingRule } from '@latchkey/contracts';

export type ConnectionLookup =
  | { connection_id: string }
  | { field: WebhookRoutingRule['match']; key: string; value: string | number | boolean }
  | null;

/** `a.b.0.c` into a parsed JSON body; undefined when absent. */
export function valueAt(body: unknown, path: string): unknown {
  let node = body;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = Array.isArray(node) ? node[Number(part)] : (node as Record<string, unknown>)[part];
  }
  return node;
}

const isScalar = (value: unknown): value is string | number | boolean =>
  (typeof value === 'string' && value !== '') || typeof value === 'number' || typeof value === 'boolean';

/**
 * How a webhook finds its connection (the spec's order): the `serviceConnectionId` query
 * parameter, else the body's `serviceConnectionId`, else the provider's routing rule (a body
 * value matched against a connection's config or metadata key). Null: nothing to look for.
 */
export function connectionLookup(query: Record<string, string>, body: unknown, rule: WebhookRoutingRule | null): ConnectionLookup {
  return possible(namedLookup(query, body, rule));
}

function namedLookup(query: Record<string, string>, body: unknown, rule: WebhookRoutingRule | null): ConnectionLookup {
  const fromQuery = query['serviceConnectionId'];
  if (fromQuery) return { connection_id: fromQuery };
  const fromBody = valueAt(body, 'serviceConnectionId');
  if (typeof fromBody === 'string' && fromBody !== '') return { connection_id: fromBody };
  if (rule) {
    const value = valueAt(body, rule.body_path);
    if (isScalar(value)) return { field: rule.match, key: rule.key, value };
  }
  return null;
}

/**
 * A lookup no connection can answer (an id longer than any connection's, an outsized value) finds
 * nothing, and is not asked: the vault's request would refuse it, with the lookups of every
 * webhook it was batched with.
 */
const possible = (lookup: ConnectionLookup): ConnectionLookup => (lookup !== null && connectionLookupSchema.safeParse(lookup).success ? lookup : null);
