import { z } from 'zod';
import { actionContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';
import { sendOutput } from './send-output.js';

/**
 * `GET /action/{id}`: an async action's output once it is done (200, the output as the sync
 * trigger gives it); 202 `{id, status, statusUrl}` while it is queued or running; its failure
 * as an error (the code the run failed with) after.
 */
export const getActionResult = defineRoute({
  method: 'get',
  path: '/action/:id',
  auth: 'api_key',
  scope: 'environment:actions:execute',
  doc: {
    summary: 'The result of an asynchronous action (202 while it runs)',
    errors: ['unknown_action_run', 'function_failed', 'function_timed_out', 'function_memory_exceeded', 'action_output_too_large'],
    // The action's output, as the synchronous trigger answers it.
    answer: z.unknown(),
    otherAnswers: [
      {
        status: 202,
        when: 'The run is queued or running: ask again',
        answer: z.object({ id: z.string(), status: z.enum(['queued', 'running']), statusUrl: z.string() }),
      },
    ],
  },
  schemas: { params: z.strictObject({ id: z.string().min(1).max(64) }) },
  handler: async ({ deps, key, params, res }) => {
    const result = await deps.bus.request(actionContracts.getResult, { environment_id: key.environmentId, id: params.id });
    if (result.status === 'done') return sendOutput(deps.bus, res, result.output, deps.config.REQUEST_TIMEOUT_MS);
    if (result.status === 'failed') {
      const code = result.error.code;
      throw new AppError(code === 'action_output_too_large' || code === 'function_timed_out' || code === 'function_memory_exceeded' || code === 'invalid_body' ? code : 'function_failed', result.error.message, {
        payload: { id: params.id },
      });
    }
    return { status: 202, body: { id: params.id, status: result.status, statusUrl: `/action/${params.id}` } };
  },
});
