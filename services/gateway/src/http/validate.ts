import { z } from 'zod';
import { JSON_MAX_DEPTH, pathTooDeep } from '@latchkey/contracts';
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
 * The schema a route's query is read with. A read route (GET) ignores query parameters it does
 * not know, as clients written for other services send some (`refresh_github_app_jwt_token`);
 * every other part stays strict, so a misspelt field in a body is a 400, not silently lost.
 */
export function querySchemaFor(method: string, schema: z.ZodType | undefined): z.ZodType | undefined {
  if (method !== 'get') return schema;
  if (schema === undefined) return z.object({});
  return schema instanceof z.ZodObject ? schema.strip() : schema;
}

/**
 * Whether a request that sends no body (no `Content-Length` or `Transfer-Encoding`, or an empty
 * one: express leaves `req.body` undefined) is read as `{}`: where the route's body schema takes
 * `{}`, every field being optional, it means just that (`curl -X POST …/connect/sessions`
 * creates a session). Where it does not, the schema refuses the missing body as any other.
 */
export function readsNoBodyAsEmpty(schema: z.ZodType | undefined): boolean {
  return schema?.safeParse({}).success === true;
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
  // A free-form field (an action's input, credentials' `raw`) that JSON.stringify could not write
  // on its way to a service: refused here, after the schema, whose own bounds speak first.
  const deep = part === 'body' ? pathTooDeep(result.data) : undefined;
  if (deep !== undefined) {
    throw new AppError(CODES[part], `Invalid ${WHAT[part]}`, {
      errors: [{ code: 'custom', message: `nested deeper than ${JSON_MAX_DEPTH} levels`, path: deep.join('.') }],
    });
  }
  return result.data;
}
