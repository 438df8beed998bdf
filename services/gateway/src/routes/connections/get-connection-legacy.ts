import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';
import { connectionReadRequest, getConnectionQuery } from './connection-query.js';

/** What the deprecated route answers for a 400 or a 404. */
const legacyError = z.object({ message: z.string() });

/**
 * Deprecated `GET /connection/{id}`: the same read, with the legacy error bodies the API
 * document gives it: 400 and 404 `{message}`, 424 `{error: {code, message}}`.
 */
export const getConnectionLegacy = defineRoute({
  method: 'get',
  path: '/connection/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:read',
  doc: {
    summary: 'Get a connection (deprecated form)',
    errors: ['unknown_connection', 'unknown_provider_config', 'refresh_token_external_error', 'connection_refresh_backoff', 'connection_refresh_exhausted', 'upstream_not_allowed'],
    answer: vaultContracts.getConnection.response,
    query: getConnectionQuery,
    errorBodies: { 400: legacyError, 404: legacyError },
  },
  // Validated inside, so that a bad query still gets the legacy body.
  schemas: { params: z.object({ connectionId: z.string() }), query: z.record(z.string(), z.unknown()) },
  handler: async ({ deps, key, params, query, res }) => {
    res.setHeader('Deprecation', 'true');
    res.setHeader('Link', `</connections/${encodeURIComponent(params.connectionId)}>; rel="successor-version"`);
    try {
      // A read route: query parameters it does not know are ignored, as on every GET.
      const parsed = getConnectionQuery.strip().safeParse(query);
      if (!parsed.success) throw new AppError('invalid_query_params', parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '));
      return { body: await deps.bus.request(vaultContracts.getConnection, connectionReadRequest(key, params.connectionId, parsed.data)) };
    } catch (error) {
      const appError = toAppError(error);
      if (appError.status === 400 || appError.status === 404) return { status: appError.status, body: { message: appError.message } };
      if (appError.status === 424) return { status: 424, body: { error: { code: appError.code, message: appError.message } } };
      throw appError;
    }
  },
});
