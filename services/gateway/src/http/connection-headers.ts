import type { IncomingMessage } from 'node:http';
import { AppError, type ErrorItem } from '@latchkey/errors';

/** `Connection-Id` and `Provider-Config-Key`, which name the connection a call is about; each missing one is listed. */
export function connectionHeaders(req: IncomingMessage): { connection_id: string; provider_config_key: string } {
  const errors: ErrorItem[] = [];
  const read = (name: string) => {
    const raw = req.headers[name];
    const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
    if (!value) errors.push({ code: 'required', message: `${name} is required`, path: name });
    else if (value.length > 255) errors.push({ code: 'too_long', message: `${name} is at most 255 characters`, path: name });
    return value ?? '';
  };
  const connection_id = read('connection-id');
  const provider_config_key = read('provider-config-key');
  if (errors.length > 0) throw new AppError('invalid_headers', 'Invalid headers', { errors });
  return { connection_id, provider_config_key };
}
