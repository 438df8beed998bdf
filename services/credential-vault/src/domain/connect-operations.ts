import { traceIdOf, type OperationLog } from '@latchkey/bus';
import { toAppError } from '@latchkey/errors';
import { currentRequestId } from '@latchkey/logger';

/** Where a connect-flow step belongs in the operations log. */
export interface StepScope {
  environment_id: string;
  integration_id?: string;
  connection_id?: string;
}

/**
 * Wraps a connect-flow handler so that each step is logged as a `connect` operation, success
 * or failure, with the error's code and coded message (never the request: it holds the end
 * user's credentials). `scopeOf` names the environment from the request or the answer; a step
 * it cannot place (an unknown session token or state) is not logged, since no environment
 * may see it. Logging never delays the answer nor changes it.
 */
export function recordedConnectStep<Req, Res>(
  operations: Pick<OperationLog, 'record'>,
  handler: (request: Req) => Promise<Res>,
  scopeOf: (request: Req, answer: Res | undefined) => Promise<StepScope | undefined>,
): (request: Req, msg?: { headers?: { get(name: string): string } | undefined }) => Promise<Res> {
  return async (request, msg) => {
    const startedAt = Date.now();
    const requestId = currentRequestId();
    const traceId = traceIdOf(msg?.headers?.get('traceparent'));
    const record = (answer: Res | undefined, error: unknown) => {
      scopeOf(request, answer)
        .then((scope) => {
          if (!scope) return;
          const appError = error === undefined ? undefined : toAppError(error);
          operations.record({
            type: 'connect',
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
