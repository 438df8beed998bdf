import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { AppError } from '@latchkey/errors';
import { runWithContext } from '@latchkey/logger';
import { nameServerSpan } from '@latchkey/tracing';
import { authorize } from './authenticate.js';
import type { BareRoute } from './define-route.js';
import type { GatewayDeps } from './deps.js';
import { sendError } from './errors.js';
import { OwnHeaders } from './own-headers.js';
import { bareRouteMetrics, timeResponse } from './request-metrics.js';
import { assignRequestId } from './request-id.js';

/** Whether `url` is `prefix` itself, or a path or query under it. */
function under(url: string, prefix: string): boolean {
  if (!url.startsWith(prefix)) return false;
  const next = url.charCodeAt(prefix.length);
  return Number.isNaN(next) || next === 47 /* / */ || next === 63 /* ? */;
}

/**
 * Whether the path part of a request target percent-decodes: a malformed escape
 * (`/connections/a%E0%A4%A`) is the caller's mistake, answered 400 for every route here, once,
 * before any route or express's parameter decoding sees it.
 */
function pathDecodes(url: string): boolean {
  const queryAt = url.indexOf('?');
  const path = queryAt < 0 ? url : url.slice(0, queryAt);
  if (!path.includes('%')) return true;
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The server's request listener: a malformed path refused first, then bare routes, by prefix, and everything else to the
 * express app. A bare route gets what the express stack gives every route: the request id
 * (echoed, and carried in async context into logs and NATS hops), the API key, the rate limit,
 * the scope check (unless the route is public), and errors in the one envelope. The headers these
 * add wait in `OwnHeaders` for the handler's `writeHead`, or for the error answer.
 */
export function withBareRoutes(app: RequestListener, routes: readonly BareRoute[], deps: GatewayDeps): RequestListener {
  const observers = routes.map((route) => bareRouteMetrics(route.doc.path, route.doc.methods));
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (!pathDecodes(url)) {
      runWithContext({ requestId: assignRequestId(req, res) }, () =>
        sendError(deps.logger, new AppError('invalid_uri_params', 'The path holds a malformed percent escape'), req, res),
      );
      return;
    }
    const index = routes.findIndex((candidate) => under(url, candidate.prefix));
    const route = routes[index];
    if (!route) {
      app(req, res);
      return;
    }
    nameServerSpan(req.method ?? 'GET', `${route.prefix}/*`);
    timeResponse(res, observers[index]!(req));
    const ownHeaders = new OwnHeaders();
    runWithContext({ requestId: assignRequestId(req, ownHeaders) }, () => {
      const fail = (error: unknown) => {
        if (!res.headersSent) ownHeaders.applyTo(res);
        sendError(deps.logger, error, req, res);
      };
      try {
        if (route.auth === 'public') {
          route.handler({ deps, req, res, ownHeaders }).catch(fail);
          return;
        }
        const key = authorize(deps, req, ownHeaders, route.scope);
        const done =
          key instanceof Promise
            ? key.then((resolved) => route.handler({ deps, key: resolved, req, res, ownHeaders }))
            : route.handler({ deps, key, req, res, ownHeaders });
        done.catch(fail);
      } catch (error) {
        fail(error);
      }
    });
  };
}
