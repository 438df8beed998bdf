import type { z } from 'zod';
import { AppError, toErrorItems, type ErrorCode } from '@latchkey/errors';

export type RequestPart = 'params' | 'query' | 'body';

const CODES: Record<RequestPart, ErrorCode> = {
  params: 'invalid_uri_params',
  query: 'invalid_query_params',
  body: 'invalid_body',
};

const WHAT: Record<RequestPart, string> = { params: 'path parameters', query: 'query parameters', body: 'body' };

function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value !== 'object') return false;
  for (const _ in value) return false;
  return true;
}

/**
 * Parses one part of a request with its schema. A route without a schema for a part accepts
 * nothing there: unknown query parameters or an unexpected body are a 400.
 */
export function parsePart(part: RequestPart, schema: z.ZodType | undefined, raw: unknown): unknown {
  if (!schema) {
    if (!isEmpty(raw)) throw new AppError(CODES[part], `This route takes no ${WHAT[part]}`);
    return undefined;
  }
  const result = schema.safeParse(raw ?? (part === 'body' ? undefined : {}));
  if (!result.success) throw new AppError(CODES[part], `Invalid ${WHAT[part]}`, { errors: toErrorItems(result.error.issues) });
  return result.data;
}
