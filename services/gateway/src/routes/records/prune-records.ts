import { z } from 'zod';
import { BASE_VARIANT, recordsContracts } from '@latchkey/contracts';
import { connectionHeaders } from '../../http/connection-headers.js';
import { defineRoute } from '../../http/define-route.js';

/**
 * Drops the payloads of a connection's records of one model up to and including the record
 * `until_cursor` names (ids and `_metadata` stay), `limit` at a time; call again while
 * `has_more`. For consumers that copied the records and want them gone from Latchkey.
 */
export const pruneRecords = defineRoute({
  method: 'patch',
  path: '/records/prune',
  auth: 'api_key',
  scope: 'environment:records:write',
  doc: {
    summary: "Drop records' payloads up to a cursor",
    headers: ['Connection-Id', 'Provider-Config-Key'],
    errors: ['unknown_connection', 'unknown_provider_config'],
    answer: recordsContracts.prune.response,
  },
  schemas: {
    body: z.strictObject({
      model: z.string().min(1).max(64),
      until_cursor: z.string().min(1).max(200),
      variant: z.string().min(1).max(64).default(BASE_VARIANT),
      limit: z.number().int().min(1).max(10_000).default(1000),
    }),
  },
  handler: async ({ deps, key, req, body }) => {
    const result = await deps.bus.request(recordsContracts.prune, {
      environment_id: key.environmentId,
      ...connectionHeaders(req),
      model: body.model,
      variant: body.variant,
      until_cursor: body.until_cursor,
      limit: body.limit,
    });
    return { body: result };
  },
});
