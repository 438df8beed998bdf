import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@latchkey/errors';
import { authenticate, authenticateAdmin, keyOf } from './authenticate.js';
import type { AnyRoute } from './define-route.js';
import type { GatewayDeps } from './deps.js';
import { validate } from './validate.js';

const METHODS_WITH_BODY = new Set(['post', 'put', 'patch']);

/** JSON routes take JSON only: another content type with a body is a 415. */
function requireJson(req: Request, _res: Response, next: NextFunction): void {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (hasBody && !req.is('application/json')) {
    throw new AppError('invalid_content_type', 'Send the body as application/json');
  }
  next();
}

function run(route: AnyRoute, deps: GatewayDeps): RequestHandler {
  return async (req, res) => {
    const input = res.locals['input'] as { params: unknown; query: unknown; body: unknown };
    const context = { ...input, deps, req, res };
    const reply =
      route.auth === 'api_key' ? await route.handler({ ...context, key: keyOf(res) }) : await route.handler(context);
    res.status(reply.status ?? 200);
    if (reply.body === undefined) res.end();
    else res.json(reply.body);
  };
}

/** Mounts each route with its chain: access, body parsing, validation, handler. */
export function mountRoutes(app: Express, routes: readonly AnyRoute[], deps: GatewayDeps): void {
  const json = express.json({ limit: deps.config.MAX_BODY_BYTES, strict: false });
  for (const route of routes) {
    const chain: RequestHandler[] = [];
    if (route.auth === 'api_key') chain.push(authenticate(deps, route.scope));
    if (route.auth === 'admin') chain.push(authenticateAdmin(deps));
    if (METHODS_WITH_BODY.has(route.method)) chain.push(requireJson, json);
    chain.push(validate('params', route.schemas.params), validate('query', route.schemas.query));
    chain.push(validate('body', route.schemas.body), run(route, deps));
    app[route.method](route.path, ...chain);
  }
}
