import type { IncomingMessage } from 'node:http';
import { AppError, type ErrorItem } from '@latchkey/errors';

/**
 * One header's first value, as node gives it. An empty (or blank) header is absent: clients
 * written for other services send optional headers empty (`Base-Url-Override: ""`).
 */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const raw = req.headers[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  return value === undefined || value.trim() === '' ? undefined : value;
}

/**
 * `Connection-Id` and `Provider-Config-Key`, which name the connection a call is about. Each
 * problem goes to `errors`, so a route can list them with problems of its own headers.
 */
export function readConnectionHeaders(req: IncomingMessage, errors: ErrorItem[]): { connection_id: string; provider_config_key: string } {
  const read = (name: string) => {
    const value = headerValue(req, name)?.trim();
    if (!value) errors.push({ code: 'required', message: `${name} is required`, path: name });
    else if (value.length > 255) errors.push({ code: 'too_long', message: `${name} is at most 255 characters`, path: name });
    return value ?? '';
  };
  return { connection_id: read('connection-id'), provider_config_key: read('provider-config-key') };
}

/** The connection headers, or 400 `invalid_headers` listing each problem. */
export function connectionHeaders(req: IncomingMessage): { connection_id: string; provider_config_key: string } {
  const errors: ErrorItem[] = [];
  const headers = readConnectionHeaders(req, errors);
  if (errors.length > 0) throw new AppError('invalid_headers', 'Invalid headers', { errors });
  return headers;
}
