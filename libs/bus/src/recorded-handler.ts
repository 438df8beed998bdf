import type { OperationType } from '@latchkey/contracts';
import { traceIdOf, type OperationLog } from './operation-recorder.js';
import { toAppError } from '@latchkey/errors';
import { currentRequestId } from '@latchkey/logger';

/** Where an operation belongs in the log. */
export interface OperationScope {
  environment_id: string;
  integration_id?: string;
  connection_id?: string;
}

/**
 * Wraps a request handler so that each call is logged as an operation of `type`, success or
 * failure, with the error's code and coded message (never the request: it may hold credentials),
 * the request id and the trace id of the `traceparent` header it came with. `scopeOf` names
 * the environment from the request or the answer; a call it cannot place (an unknown session
 * token, say) is not logged, since no environment may see it. Logging never delays the answer
 * nor changes it.
 */
export function recordedHandler<Req, Res>(
  operations: Pick<OperationLog, 'record'>,
  type: OperationType,
  handler: (request: Req) => Promise<Res>,
  scopeOf: (request: Req, answer: Res | undefined) => OperationScope | undefined | Promise<OperationScope | undefined>,
): (request: Req, msg?: { headers?: { get(name: string): string } | undefined }) => Promise<Res> {
  return async (request, msg) => {
    const startedAt = Date.now();
    const requestId = currentRequestId();
    const traceId = traceIdOf(msg?.headers?.get('traceparent'));
    const record = (answer: Res | undefined, error: unknown) => {
      Promise.resolve()
        .then(() => scopeOf(request, answer))
        .then((scope) => {
          if (!scope) return;
          const appError = error === undefined ? undefined : toAppError(error);
          operations.record({
            type,
            ...scope,
            status: appError ? 'failure' : 'success',
            started_at: new Date(startedAt).toISOString(),
            duration_ms: Date.now() - startedAt,
            ...(requestId === undefined ? {} : { request_id: requestId }),
            ...(traceId === undefined ? {} : { trace_id: traceId }),
            ...(appError ? { error: { code: appError.code, message: appError.message.slice(0, 1000) } } : {}),
          });
        })
        .catch(() => undefined);
    };
    try {
      const answer = await handler(request);
      record(answer, undefined);
      return answer;
    } catch (error) {
      record(undefined, error);
      throw error;
    }
  };
}
