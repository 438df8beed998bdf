import { environmentId } from '@latchkey/mongo';
import { defineRoute } from '../../http/define-route.js';
import { operationFilterOf, operationListQuery, operationPage } from './operation-query.js';

/**
 * `GET /operations`: the environment's operations log, newest first (proxy calls, sync and
 * action runs, webhooks, connect-flow steps, refreshes, deploys). Page on with `next_cursor`
 * until it is null.
 */
export const listOperations = defineRoute({
  method: 'get',
  path: '/operations',
  auth: 'api_key',
  scope: 'environment:operations:read',
  doc: {
    summary: 'List operations, newest first',
    description: 'Filters: `type` (comma list), `status`, `integration_id`, `connection_id`, `from` (inclusive) and `to` (exclusive) on the start time. Page with `cursor` = the last page\'s `next_cursor` until it is null: a request reads at most about 20,000 operations, so a filter that matches few may answer fewer than `limit`, even none, with a `next_cursor`.',
    answer: operationPage,
  },
  schemas: { query: operationListQuery },
  handler: async ({ deps, key, query }) => ({
    body: await deps.operations.list(environmentId(key.environmentId), operationFilterOf(query), query.limit),
  }),
});
