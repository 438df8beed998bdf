import { z } from 'zod';
import { serveBytes } from '@latchkey/bus';
import { DEPLOYED_FUNCTION_SCOPES, deploymentBody, functionsContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';

const DEPLOY_TIMEOUT_MS = 60_000;

/**
 * `POST /functions/deployments` (what `latchkey deploy` calls): one integration's bundled
 * functions become its next version, all at once. The body goes to the sync-scheduler as a
 * pull stream, so its size is bounded by MAX_BODY_BYTES rather than by a NATS message. Deployed
 * code runs for the environment: the key needs `DEPLOYED_FUNCTION_SCOPES` too (a key holding
 * `environment:deploy` alone deployed a sync that read every connection's credentials).
 */
export const deployFunctions = defineRoute({
  method: 'post',
  path: '/functions/deployments',
  largeBody: true,
  auth: 'api_key',
  scope: 'environment:deploy',
  doc: {
    summary: "Deploy an integration's functions as its next version",
    status: 201,
    errors: ['forbidden', 'unknown_provider_config', 'invalid_frequency'],
    answer: z.object({ data: functionsContracts.deploy.response }),
  },
  schemas: { body: deploymentBody },
  handler: async ({ deps, key, body }) => {
    const missing = DEPLOYED_FUNCTION_SCOPES.filter((scope) => !key.scopes.has(scope));
    if (missing.length > 0) {
      throw new AppError('forbidden', `Deployed functions run with the environment's access: deploying needs ${missing.join(', ')} as well as environment:deploy`, {
        payload: { scope: missing.join(' ') },
      });
    }
    const upload = serveBytes(deps.bus, Buffer.from(JSON.stringify(body)), { idleTimeoutMs: DEPLOY_TIMEOUT_MS });
    const deployed = await deps.bus.request(functionsContracts.deploy, { environment_id: key.environmentId, upload: upload.inbox }, { timeoutMs: DEPLOY_TIMEOUT_MS });
    return { status: 201, body: { data: deployed } };
  },
});
