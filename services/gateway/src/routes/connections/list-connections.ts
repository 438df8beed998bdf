import { z } from 'zod';
import { LIST_FILTER_MAX_INTEGRATIONS, TAGS_MAX, fewTags, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { queryList } from '../query.js';

/** List items only: never credentials, whatever the key's scopes. */
export const listConnections = defineRoute({
  method: 'get',
  path: '/connections',
  auth: 'api_key',
  scope: 'environment:connections:list',
  doc: { summary: 'List connections', answer: z.object({ connections: vaultContracts.listConnections.response }) },
  schemas: {
    query: z.strictObject({
      connectionId: z.string().max(255).optional(),
      integrationId: queryList.pipe(z.array(z.string()).max(LIST_FILTER_MAX_INTEGRATIONS)),
      tags: z.record(z.string(), z.string()).refine(fewTags, `at most ${TAGS_MAX} tags`).optional(),
      endUserId: z.string().max(255).optional(),
      /** Deprecated alias of endUserId. */
      userId: z.string().max(255).optional(),
      search: z.string().max(255).optional(),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
      page: z.coerce.number().int().min(0).default(0),
    }),
  },
  handler: async ({ deps, key, query }) => {
    const endUserId = query.endUserId ?? query.userId;
    const connections = await deps.bus.request(vaultContracts.listConnections, {
      environment_id: key.environmentId,
      ...(query.connectionId === undefined ? {} : { connection_id: query.connectionId }),
      ...(query.integrationId.length ? { integration_ids: query.integrationId } : {}),
      ...(query.tags === undefined ? {} : { tags: query.tags }),
      ...(endUserId === undefined ? {} : { end_user_id: endUserId }),
      ...(query.search === undefined ? {} : { search: query.search }),
      limit: query.limit,
      page: query.page,
    });
    return { body: { connections } };
  },
});
