import { functionsContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/** `GET /scripts/config`: per integration, the deployed syncs (models and fields), actions and lifecycle functions. */
export const getScriptsConfig = defineRoute({
  method: 'get',
  path: '/scripts/config',
  auth: 'api_key',
  scope: 'environment:integrations:list_functions',
  doc: { summary: 'The deployed functions of every integration', answer: functionsContracts.scriptsConfig.response },
  schemas: {},
  handler: async ({ deps, key }) => ({ body: await deps.bus.request(functionsContracts.scriptsConfig, { environment_id: key.environmentId }) }),
});
