import type { NextFunction, Request, Response } from 'express';
import type { z } from 'zod';
import { AppError, toErrorItems, type ErrorCode } from '@latchkey/errors';

type Part = 'params' | 'query' | 'body';

const CODES: Record<Part, ErrorCode> = {
  params: 'invalid_uri_params',
  query: 'invalid_query_params',
  body: 'invalid_body',
};

function isEmpty(value: unknown): boolean {
  return value === undefined || (typeof value === 'object' && value !== null && Object.keys(value).length === 0);
}

/**
 * Parses one part of the request with its schema into `res.locals.input[part]`. A route without
 * a schema for a part accepts nothing there: unknown query or body keys are a 400.
 */
export function validate(part: Part, schema: z.ZodType | undefined) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const raw: unknown = req[part];
    const input = (res.locals['input'] ??= {}) as Record<Part, unknown>;
    if (!schema) {
      if (!isEmpty(raw)) throw new AppError(CODES[part], `This route takes no ${part === 'body' ? 'body' : 'query parameters'}`);
      input[part] = undefined;
      return next();
    }
    const result = schema.safeParse(raw ?? (part === 'body' ? undefined : {}));
    if (!result.success) {
      throw new AppError(CODES[part], `Invalid ${part === 'params' ? 'path parameters' : part === 'query' ? 'query parameters' : 'body'}`, {
        errors: toErrorItems(result.error.issues),
      });
    }
    input[part] = result.data;
    next();
  };
}
