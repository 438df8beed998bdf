import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { OWN_ERROR_HEADER } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { fromDatabase } from '../db/unavailable.js';
import { countAuthFailure } from './request-metrics.js';

/** body-parser's failures, told apart by their `type`, mapped to our codes. */
function fromBodyParser(error: unknown): AppError | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  if (type === 'entity.too.large') return new AppError('payload_too_large', 'The request body is larger than the limit');
  if (type === 'entity.parse.failed') return new AppError('invalid_json', 'The request body is not valid JSON');
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return new AppError('invalid_content_type', 'The request body encoding is not supported');
  }
  // Any other body it could not read is the caller's too: a body that its Content-Encoding does
  // not decode (zlib's error, with no type), or one whose length does not match its header.
  const parserError = error as { status?: unknown; expose?: unknown } | null;
  if (!(error instanceof AppError) && parserError?.status === 400 && parserError.expose === true) {
    return new AppError('invalid_json', 'The request body could not be read');
  }
  return undefined;
}

export function notFound(req: Request): never {
  throw new AppError('route_not_found', `No route for ${req.method} ${req.path}`);
}

/**
 * Every error leaves in the one envelope; internals are logged, never sent. Plain node objects,
 * so routes served before express (the proxy) answer the same way.
 */
export function sendError(logger: Logger, error: unknown, req: IncomingMessage, res: ServerResponse): void {
  const appError = fromBodyParser(error) ?? fromDatabase(error) ?? toAppError(error);
  const path = (req.url ?? '').split('?')[0];
  countAuthFailure(appError.code);
  if (appError.code === 'internal_error') {
    logger.error('request failed', { method: req.method, path, error: appError.cause ?? appError });
  } else if (appError.status >= 500) {
    logger.warn('request failed', { method: req.method, path, code: appError.code, message: appError.message });
  }
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = appError.status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  // Says the error is the gateway's own, not a provider's answer passed on by the proxy (whose
  // body may be an envelope just like ours, or none at all for a HEAD). The proxy drops this
  // header from providers' answers, so only the gateway can set it.
  res.setHeader(OWN_ERROR_HEADER, appError.code);
  const body = appError.toBody();
  // Routes whose errors the API document gives as `{message}` (express keeps the mark in locals).
  const shape = (res as Partial<Response>).locals?.['errorShape'];
  res.end(JSON.stringify(shape === 'message' ? { message: body.message, error: body } : { error: body }));
}

export function errorHandler(logger: Logger) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => sendError(logger, error, req, res);
}
