import express, { type Express } from 'express';
import qs from 'qs';
import type { AnyRoute } from './define-route.js';
import type { GatewayDeps } from './deps.js';
import { errorHandler, notFound } from './errors.js';
import { mountRoutes } from './mount-routes.js';
import { requestId } from './request-id.js';

/**
 * Query strings with nesting (`tags[k]=v` filters). A list may repeat its parameter as often as
 * a URL holds (qs makes an object of more than 20 by default, which no list schema takes); the
 * request line's own size limit bounds how many that is.
 */
const QUERY_LIST_MAX = 10_000;
const parseQuery = (text: string) => qs.parse(text, { arrayLimit: QUERY_LIST_MAX, parameterLimit: QUERY_LIST_MAX });

export function createApp(deps: GatewayDeps, routes: readonly AnyRoute[]): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', parseQuery);
  app.use(requestId);
  mountRoutes(app, routes, deps);
  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return app;
}
