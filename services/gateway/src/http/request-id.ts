import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { requestIdFrom, runWithContext } from '@latchkey/logger';
import type { HeaderSink } from './own-headers.js';

/**
 * The caller's `X-Request-Id` when it is a plain token, else a new one; echoed on the response
 * (`res`: the response, or a bare route's own headers).
 */
export function assignRequestId(req: IncomingMessage, res: HeaderSink): string {
  const id = requestIdFrom(req.headers['x-request-id']);
  res.setHeader('X-Request-Id', id);
  return id;
}

/** Express middleware: the request id, carried through async context into every log line and NATS hop. */
export function requestId(req: Request, res: Response, next: NextFunction): void {
  runWithContext({ requestId: assignRequestId(req, res) }, next);
}
