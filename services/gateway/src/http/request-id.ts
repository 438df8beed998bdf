import type { NextFunction, Request, Response } from 'express';
import { isValidRequestId, newRequestId, runWithContext } from '@latchkey/logger';

/**
 * Takes the caller's `X-Request-Id` when it is a plain token, else mints one; echoes it on the
 * response and carries it, through async context, into every log line and NATS hop.
 */
export function requestId(req: Request, res: Response, next: NextFunction): void {
  const given = req.headers['x-request-id'];
  const id = isValidRequestId(given) ? given : newRequestId();
  res.setHeader('X-Request-Id', id);
  runWithContext({ requestId: id }, next);
}
