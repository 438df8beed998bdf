/**
 * Keys whose values never reach a log line, whatever their nesting. Patterns follow the house
 * style list: `authorization`, `*.secret`, `*.token`, `credentials.*`, plus their usual variants
 * (a header's `x-api-key` as a config's `api_key`).
 */
const SECRET_KEY = /authorization|cookie|secret|token|password|passwd|passphrase|^pass$|^pwd$|api[-_]?key|private[-_]?key|signing[-_]?key/i;
const SECRET_CONTAINER = /^credentials$/i;
export const REDACTED = '[redacted]';
const MAX_DEPTH = 8;

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** A deep copy of `value` with secret-looking keys and everything under `credentials` masked. */
export function redact(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[truncated]';
  if (value instanceof Error) {
    return { name: value.name, message: value.message, ...(value.stack ? { stack: value.stack } : {}) };
  }
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (isSecretKey(key) || SECRET_CONTAINER.test(key)) {
      out[key] = item === undefined || item === null ? item : REDACTED;
    } else {
      out[key] = redact(item, depth + 1);
    }
  }
  return out;
}
