import { z } from 'zod';
import { BASE_VARIANT, RECORD_ACTIONS, modelName, recordsContracts, variantName } from '@latchkey/contracts';
import { connectionHeaders } from '../../http/connection-headers.js';
import { defineRoute } from '../../http/define-route.js';
import { queryList } from '../query.js';

/** `filter=added,updated`: which last actions to return, any combination (case-insensitive). */
const actionFilter = queryList.pipe(
  z.array(
    z
      .string()
      .transform((value) => value.toUpperCase())
      .pipe(z.enum(RECORD_ACTIONS, { error: 'each of added, updated, deleted' })),
  ),
);

/**
 * A page of a connection's synced records of one model, in the order they last changed. Page on
 * with `next_cursor` until it is null; the cursor of any record (`_metadata.cursor`) also reads
 * on from that record, so a consumer can resume where it stopped.
 */
export const listRecords = defineRoute({
  method: 'get',
  path: '/records',
  auth: 'api_key',
  scope: 'environment:records:read',
  doc: {
    summary: 'Read synced records in change order',
    headers: ['Connection-Id', 'Provider-Config-Key'],
    errors: ['unknown_connection', 'unknown_provider_config'],
    answer: recordsContracts.list.response,
  },
  schemas: {
    query: z.strictObject({
      model: modelName,
      variant: variantName.default(BASE_VARIANT),
      modified_after: z.iso.datetime({ offset: true }).optional(),
      /** Deprecated alias of modified_after. */
      delta: z.iso.datetime({ offset: true }).optional(),
      limit: z.coerce.number().int().min(1).max(10_000).default(100),
      filter: actionFilter,
      cursor: z.string().min(1).max(200).optional(),
      ids: queryList.pipe(z.array(z.string()).max(10_000)),
    }),
  },
  handler: async ({ deps, key, req, query }) => {
    const modifiedAfter = query.modified_after ?? query.delta;
    const page = await deps.bus.request(recordsContracts.list, {
      environment_id: key.environmentId,
      ...connectionHeaders(req),
      model: query.model,
      variant: query.variant,
      ...(modifiedAfter === undefined ? {} : { modified_after: modifiedAfter }),
      ...(query.filter.length > 0 ? { filter: [...new Set(query.filter)] } : {}),
      limit: query.limit,
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
      ...(query.ids.length > 0 ? { ids: query.ids } : {}),
    });
    return { body: page };
  },
});
