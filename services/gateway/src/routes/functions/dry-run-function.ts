import { z } from 'zod';
import { MAX_ACTION_INPUT_BYTES, actionContracts, type Scope } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';

const body = z
  .strictObject({
    provider_config_key: z.string().min(1).max(128),
    connection_id: z.string().min(1).max(255),
    source: z.string().min(1).max(512 * 1024).optional(),
    function_name: z.string().min(1).max(100).optional(),
    input: z.unknown().optional(),
  })
  .refine((value) => (value.source === undefined) !== (value.function_name === undefined), { message: 'give exactly one of source and function_name', path: ['source'] });

/** What the API document asks of a key that dry-runs (Authentication, item 7), beside the route's own scope. */
const DRY_RUN_SCOPES: readonly Scope[] = ['environment:connections:read', 'environment:integrations:read', 'environment:proxy'];

/**
 * `POST /functions/dryruns`: runs a function (source, or a deployed one by name) against a real
 * connection and answers `{function, success, output | error, logs, writes, duration_ms}`.
 * Nothing is persisted: metadata and record writes are listed in `writes` instead. The key's
 * scopes travel with the run, and the action-runner checks every `ctx` call against them (no
 * credentials without `connections:read_credentials`), so a dry run does no more than the key
 * could through the API.
 */
export const dryRunFunction = defineRoute({
  method: 'post',
  path: '/functions/dryruns',
  largeBody: true,
  auth: 'api_key',
  scope: 'environment:functions:dryrun',
  doc: {
    summary: 'Run a function against a connection without applying its writes',
    errors: ['function_compilation_failed', 'unknown_function', 'unknown_connection', 'unknown_provider_config'],
    answer: actionContracts.dryRun.response,
  },
  schemas: { body },
  handler: async ({ deps, key, body }) => {
    const missing = DRY_RUN_SCOPES.find((scope) => !key.scopes.has(scope));
    if (missing) throw new AppError('forbidden', `This API key lacks the scope ${missing}`, { payload: { scope: missing } });
    if (body.input !== undefined && Buffer.byteLength(JSON.stringify(body.input)) > MAX_ACTION_INPUT_BYTES) {
      throw new AppError('payload_too_large', `A dry run's input may be at most ${MAX_ACTION_INPUT_BYTES} bytes of JSON`);
    }
    return {
      body: await deps.bus.request(actionContracts.dryRun, { environment_id: key.environmentId, ...body, caller_scopes: [...key.scopes] }, { timeoutMs: deps.config.FUNCTION_TIMEOUT_MS + 40_000 }),
    };
  },
});
