import { z } from 'zod';
import { OPERATION_STATUSES, OPERATION_TYPES, operationView } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { OperationFilter, OperationRepo } from '../../db/operation-repo.js';
import type { EnvironmentId } from '@latchkey/mongo';
import { queryList } from '../query.js';

/** An operation id as the recorder makes it: a base-36 start time, then random base64url. */
export const operationId = z.string().regex(/^[0-9a-z]{9}[A-Za-z0-9_-]{1,40}$/, 'an operation id');

/**
 * The filters of an operations list: `type` (one or more, comma list or repeated), `status`,
 * `integration_id`, `connection_id`, a time range on the start (`from` inclusive, `to`
 * exclusive), and a page (`limit`, and the `cursor` of the last page's `next_cursor`).
 */
export const operationListQuery = z
  .strictObject({
    type: queryList.pipe(z.array(z.enum(OPERATION_TYPES, { error: `each of ${OPERATION_TYPES.join(', ')}` }))),
    status: z.enum(OPERATION_STATUSES).optional(),
    integration_id: z.string().min(1).max(255).optional(),
    connection_id: z.string().min(1).max(255).optional(),
    from: z.iso.datetime({ offset: true }).optional(),
    to: z.iso.datetime({ offset: true }).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
    cursor: operationId.optional(),
  })
  .refine((query) => query.from === undefined || query.to === undefined || Date.parse(query.from) < Date.parse(query.to), {
    message: 'from must be before to',
    path: ['from'],
  });

export type OperationListQuery = z.output<typeof operationListQuery>;

export function operationFilterOf(query: OperationListQuery): OperationFilter {
  return {
    ...(query.type.length > 0 ? { types: [...new Set(query.type)] } : {}),
    ...(query.status === undefined ? {} : { status: query.status }),
    ...(query.integration_id === undefined ? {} : { integration_id: query.integration_id }),
    ...(query.connection_id === undefined ? {} : { connection_id: query.connection_id }),
    ...(query.from === undefined ? {} : { from: new Date(query.from) }),
    ...(query.to === undefined ? {} : { to: new Date(query.to) }),
    ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
  };
}

export const operationPage = z.object({ operations: z.array(operationView), next_cursor: z.string().nullable() });

export async function findOperation(deps: { operations: Pick<OperationRepo, 'get'> }, environment: EnvironmentId, id: string) {
  const found = await deps.operations.get(environment, id);
  if (!found) throw new AppError('not_found', `No operation ${id}`);
  return found;
}
