import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@latchkey/errors';
import type { ConnectSession } from '@latchkey/contracts';
import { httpRouteMetrics } from '@latchkey/metrics';
import { nameServerSpan } from '@latchkey/tracing';
import type { ResolvedKey } from '../domain/key-cache.js';
import { authorize, authorizeAdmin, authorizeSession, carriesSessionToken } from './authenticate.js';
import type { AnyRoute } from './define-route.js';
import type { GatewayDeps } from './deps.js';
import { timeResponse } from './request-metrics.js';
import { parsePart, querySchemaFor, readsNoBodyAsEmpty } from './validate.js';

const METHODS_WITH_BODY = new Set(['post', 'put', 'patch']);

/** JSON routes take JSON only: another content type with a body is a 415. */
function requireJson(req: Request): void {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (hasBody && !req.is('application/json')) throw new AppError('invalid_content_type', 'Send the body as application/json');
}

/**
 * One handler per route, running its steps in order: access, body, validation, the route's own
 * handler, the reply. One function rather than a chain of middleware keeps the hot path short,
 * and while the key is cached and rate-limit tokens are reserved nothing before the route's own
 * handler waits (a promise also carries the async context of request ids: dear on Node 20, cheap
 * with Node 24's AsyncContextFrame, and still none on the fast path).
 */
function handlerFor(route: AnyRoute, deps: GatewayDeps): RequestHandler {
  // A DELETE reads a body only where the route declares one (`DELETE /sync/{name}/variant/{variant}`).
  const takesBody = METHODS_WITH_BODY.has(route.method) || (route.method === 'delete' && !route.raw && route.schemas.body !== undefined);
  const { MAX_BODY_BYTES, MAX_JSON_BODY_BYTES } = deps.config;
  const limit = route.largeBody ? MAX_BODY_BYTES : Math.min(MAX_JSON_BODY_BYTES, MAX_BODY_BYTES);
  const json = takesBody && !route.raw ? express.json({ limit, strict: false }) : undefined;
  const querySchema = querySchemaFor(route.method, route.schemas.query);
  const noBodyIsEmpty = readsNoBodyAsEmpty(route.schemas.body);

  const respond = (req: Request, res: Response, key: ResolvedKey | undefined, session?: ConnectSession & { token: string }): Promise<void> => {
    const context = {
      params: route.raw ? undefined : parsePart('params', route.schemas.params, req.params),
      query: route.raw ? undefined : parsePart('query', querySchema, req.query),
      // Undefined: no body was sent (a JSON `null` is a body, and stays one).
      body: route.raw ? undefined : parsePart('body', route.schemas.body, req.body === undefined && noBodyIsEmpty ? {} : req.body),
      deps,
      req,
      res,
    };
    const reply =
      route.auth === 'api_key'
        ? route.handler({ ...context, key: key! })
        : route.auth === 'connect_session'
          ? route.handler({ ...context, session: session! })
          : route.handler(context);
    return reply.then((result) => {
      if ('streamed' in result) return;
      res.statusCode = result.status ?? 200;
      if (result.body === undefined) res.end();
      else res.json(result.body);
    });
  };

  const readBody = (req: Request, res: Response) =>
    new Promise<void>((resolve, reject) => {
      requireJson(req);
      json!(req, res, (error?: unknown) => (error ? reject(error) : resolve()));
    });

  return (req, res, next) => {
    nameServerSpan(route.method, route.path);
    if (route.errorShape) res.locals['errorShape'] = route.errorShape;
    try {
      let key: ResolvedKey | Promise<ResolvedKey> | undefined;
      // A route open to either an API key or an end user's session asks whichever the token is.
      const bySession = route.auth === 'connect_session' || (route.auth === 'api_key_or_session' && carriesSessionToken(req));
      if (route.auth === 'api_key' || (route.auth === 'api_key_or_session' && !bySession)) key = authorize(deps, req, res, route.scope);
      else if (route.auth === 'admin') authorizeAdmin(deps, req);
      if (key instanceof Promise || json || bySession) {
        (async () => {
          const resolved = await key;
          const session = bySession ? await authorizeSession(deps, req, res) : undefined;
          if (json) await readBody(req, res);
          await respond(req, res, resolved, session);
        })().catch(next);
        return;
      }
      respond(req, res, key).catch(next);
    } catch (error) {
      next(error);
    }
  };
}

export function mountRoutes(app: Express, routes: readonly AnyRoute[], deps: GatewayDeps): void {
  for (const route of routes) {
    const handler = handlerFor(route, deps);
    // Labelled with the route's template as the API reference writes it (`/connections/{connectionId}`),
    // never the path as sent: that carries ids.
    const observe = httpRouteMetrics(route.path.replace(/:(\w+)/g, '{$1}'), route.method);
    app[route.method](route.path, (req, res, next) => {
      timeResponse(res, observe);
      handler(req, res, next);
    });
  }
}
