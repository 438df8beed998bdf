import { actionContracts, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import { connectionParams, providerConfigKeyQuery } from './connection-query.js';

/** The longest a deletion waits for the integration's `pre-connection-deletion` functions. */
const PRE_DELETION_WAIT_MS = 10_000;

/**
 * Deletes a connection. First, while it still exists, the integration's pre-deletion functions
 * run (to remove a provider subscription, say); whatever they do, fail or take, the deletion
 * follows: their outcome is logged by the action-runner and never answers the caller.
 */
export const deleteConnection = defineRoute({
  method: 'delete',
  path: '/connections/:connectionId',
  auth: 'api_key',
  scope: 'environment:connections:delete',
  doc: { summary: 'Delete a connection', errors: ['unknown_connection'], answer: vaultContracts.deleteConnection.response },
  schemas: { params: connectionParams, query: providerConfigKeyQuery },
  handler: async ({ deps, key, params, query }) => {
    const target = { environment_id: key.environmentId, connection_id: params.connectionId, provider_config_key: query.provider_config_key };
    await deps.bus.request(actionContracts.runPreDeletion, target, { timeoutMs: PRE_DELETION_WAIT_MS }).catch((error: unknown) => {
      deps.logger.warn('pre-deletion functions did not complete; deleting anyway', { error });
    });
    return { body: await deps.bus.request(vaultContracts.deleteConnection, target) };
  },
});
