import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth: the same record always gives the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
  return sorted;
}

/** What "unchanged" compares: a SHA-256 of the canonical JSON. */
export function contentHash(canonical: string): string {
  return createHash('sha256').update(canonical).digest('base64url');
}

/** A record's `id` as the store keys it, or undefined when it has none it can use. */
export function recordId(record: Record<string, unknown>): string | undefined {
  const id = record['id'];
  if (typeof id === 'string' && id.length > 0 && id.length <= 255) return id;
  if (typeof id === 'number' && Number.isSafeInteger(id)) return String(id);
  return undefined;
}
