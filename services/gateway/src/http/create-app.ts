import express, { type Express } from 'express';
import type { AnyRoute } from './define-route.js';
import type { GatewayDeps } from './deps.js';
import { errorHandler, notFound } from './errors.js';
import { mountRoutes } from './mount-routes.js';
import { requestId } from './request-id.js';

export function createApp(deps: GatewayDeps, routes: readonly AnyRoute[]): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // `tags[k]=v` style filters need nested query parsing.
  app.set('query parser', 'extended');
  app.use(requestId);
  mountRoutes(app, routes, deps);
  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return app;
}
