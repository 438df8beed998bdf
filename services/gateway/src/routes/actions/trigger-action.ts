import type { Request } from 'express';
import { z } from 'zod';
import { actionContracts } from '@latchkey/contracts';
import { AppError, type ErrorItem } from '@latchkey/errors';
import { actionTriggerWait, checkActionInput } from '../../http/action-call.js';
import { headerValue, readConnectionHeaders } from '../../http/connection-headers.js';
import { defineRoute } from '../../http/define-route.js';
import { sendOutput } from './send-output.js';

const body = z.strictObject({
  action_name: z.string().min(1).max(100),
  input: z.unknown().optional(),
});

/** An action queued with `X-Async: true`: its run and where to read the result (`GET /action/{id}`). */
const queuedAnswer = z.object({ id: z.string(), statusUrl: z.string() });

/** The action's headers, each problem listed. */
function target(req: Request) {
  const errors: ErrorItem[] = [];
  const where = readConnectionHeaders(req, errors);
  const asyncFlag = headerValue(req, 'x-async');
  if (asyncFlag !== undefined && asyncFlag !== 'true' && asyncFlag !== 'false') errors.push({ code: 'invalid_value', message: 'true or false', path: 'x-async' });
  if (errors.length > 0) throw new AppError('invalid_headers', 'Invalid action headers', { errors });
  return { ...where, async: asyncFlag === 'true' };
}

/**
 * `POST /action/trigger`: runs a deployed action for a connection and answers with its output;
 * with `X-Async: true`, queues it and answers 202 with its id and status URL.
 */
export const triggerAction = defineRoute({
  method: 'post',
  path: '/action/trigger',
  auth: 'api_key',
  scope: 'environment:actions:execute',
  doc: {
    summary: 'Run an action (synchronously, or with X-Async: true as a job)',
    headers: ['Connection-Id', 'Provider-Config-Key'],
    errors: ['unknown_action', 'unknown_connection', 'unknown_provider_config', 'function_failed', 'function_timed_out', 'function_memory_exceeded', 'action_output_too_large'],
    // The action's output: whatever JSON it returns.
    answer: z.unknown(),
    otherAnswers: [{ status: 202, when: 'With `X-Async: true`: the run is queued; read its result at `statusUrl`', answer: queuedAnswer }],
  },
  schemas: { body },
  handler: async ({ deps, key, body, req, res }) => {
    const { async, ...where } = target(req);
    checkActionInput(body.input);
    const reply = await deps.bus.request(
      actionContracts.trigger,
      { environment_id: key.environmentId, ...where, action_name: body.action_name, input: body.input, async },
      actionTriggerWait(deps.config, async),
    );
    if (reply.status === 'queued') return { status: 202, body: { id: reply.id, statusUrl: `/action/${reply.id}` } };
    return sendOutput(deps.bus, res, reply.output, deps.config.REQUEST_TIMEOUT_MS);
  },
});
