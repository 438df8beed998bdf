import { z } from 'zod';
import { functionsContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

const COMPILE_TIMEOUT_MS = 30_000;

/**
 * `POST /functions/compile`: bundles one TypeScript source on the server (imports resolve to
 * `@latchkey/functions` only) and answers `{success, diagnostics, bytes}`; stores nothing.
 * A source that does not compile is a 200 with `success: false` and its diagnostics.
 */
export const compileFunction = defineRoute({
  method: 'post',
  path: '/functions/compile',
  largeBody: true,
  auth: 'api_key',
  scope: 'environment:functions:compile',
  doc: { summary: 'Bundle and type-check function source, storing nothing' },
  schemas: { body: z.strictObject({ source: z.string().min(1).max(512 * 1024), filename: z.string().min(1).max(200).optional() }) },
  handler: async ({ deps, body }) => {
    const result = await deps.bus.request(functionsContracts.compile, body, { timeoutMs: COMPILE_TIMEOUT_MS });
    return { body: { success: result.success, diagnostics: result.diagnostics, ...(result.bytes === undefined ? {} : { bytes: result.bytes }) } };
  },
});
