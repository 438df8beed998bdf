import { z } from 'zod';
import { serveBytes } from '@latchkey/bus';
import { deploymentBody, functionsContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

const DEPLOY_TIMEOUT_MS = 60_000;

/**
 * `POST /functions/deployments` (what `latchkey deploy` calls): one integration's bundled
 * functions become its next version, all at once. The body goes to the sync-scheduler as a
 * pull stream, so its size is bounded by MAX_BODY_BYTES rather than by a NATS message.
 */
export const deployFunctions = defineRoute({
  method: 'post',
  path: '/functions/deployments',
  auth: 'api_key',
  scope: 'environment:deploy',
  doc: {
    summary: "Deploy an integration's functions as its next version",
    status: 201,
    errors: ['unknown_provider_config', 'invalid_frequency'],
    answer: z.object({ data: functionsContracts.deploy.response }),
  },
  schemas: { body: deploymentBody },
  handler: async ({ deps, key, body }) => {
    const upload = serveBytes(deps.bus, Buffer.from(JSON.stringify(body)), { idleTimeoutMs: DEPLOY_TIMEOUT_MS });
    const deployed = await deps.bus.request(functionsContracts.deploy, { environment_id: key.environmentId, upload: upload.inbox }, { timeoutMs: DEPLOY_TIMEOUT_MS });
    return { status: 201, body: { data: deployed } };
  },
});
