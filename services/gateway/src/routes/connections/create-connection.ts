import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/** The import body: the vault's request less what the gateway fills in from the key. */
const importBody = vaultContracts.createConnection.request.omit({ environment_id: true, reader: true, include_credentials: true, reads_client_secrets: true }).strict();

/** Imports a connection with credentials the customer already holds. */
export const createConnection = defineRoute({
  method: 'post',
  path: '/connections',
  auth: 'api_key',
  scope: 'environment:connections:create',
  doc: {
    summary: 'Import a connection with credentials you hold',
    status: 201,
    errors: ['unknown_provider_config'],
    answer: vaultContracts.createConnection.response,
  },
  schemas: { body: importBody },
  handler: async ({ deps, key, body }) => ({
    status: 201,
    body: await deps.bus.request(vaultContracts.createConnection, {
      ...body,
      environment_id: key.environmentId,
      reader: { key_id: key.keyId },
      include_credentials: key.scopes.has('environment:connections:read_credentials'),
      reads_client_secrets: key.scopes.has('environment:integrations:read_credentials'),
    }),
  }),
});
