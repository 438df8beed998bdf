import { z } from 'zod';
import { CREDENTIAL_TYPES, metadataSchema, vaultContracts, type CredentialType, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';
import type { GatewayDeps } from '../../http/deps.js';

const integrationParams = z.strictObject({ integration: z.string().min(1).max(128) });
const sessionQuery = z.strictObject({ connect_session_token: z.string().min(1).optional() });

/** Credential fields as an end user enters them, plus the connection config the provider asks for. */
const formBody = z.object({ connection_config: metadataSchema.optional() }).catchall(z.unknown());

/** Hands the fields to the vault, which checks them against the type's schema and saves them. */
async function save(deps: GatewayDeps, token: string, integration: string, type: string, body: z.output<typeof formBody>) {
  const { connection_config: connectionConfig, ...fields } = body;
  const saved = await deps.bus.request(vaultContracts.connectWithSession, {
    token,
    integration,
    // Unchecked here on purpose: the bus validates the request against the contract before it is
    // sent, and the invalid_body it raises names each wrong field (`credentials.apiKey`).
    credentials: { ...fields, type } as unknown as RequestOf<typeof vaultContracts.connectWithSession>['credentials'],
    ...(connectionConfig === undefined ? {} : { connection_config: connectionConfig }),
  });
  return { body: { connectionId: saved.connectionId, providerConfigKey: saved.providerConfigKey } };
}

function saveCredentials(type: CredentialType, path: string) {
  return defineRoute({
    method: 'post',
    path,
    auth: 'connect_session',
    scope: null,
    schemas: { params: integrationParams, query: sessionQuery, body: formBody },
    handler: ({ deps, session, params, body }) => save(deps, session.token, params.integration, type, body),
  });
}

/** The end user's API key for an API_KEY integration: `{apiKey, connection_config?}`. */
export const saveApiKey = saveCredentials('API_KEY', '/api-auth/api-key/:integration');

/** The end user's username and password for a BASIC integration. */
export const saveBasic = saveCredentials('BASIC', '/api-auth/basic/:integration');

/** Any other form-based type: `/auth/{type}/{integration}` with that type's fields. */
export const saveTypedCredentials = defineRoute({
  method: 'post',
  path: '/auth/:type/:integration',
  auth: 'connect_session',
  scope: null,
  schemas: {
    params: z.strictObject({ type: z.string().min(1).max(32), integration: z.string().min(1).max(128) }),
    query: sessionQuery,
    body: formBody,
  },
  handler: async ({ deps, session, params, body }) => {
    const type = params.type.toUpperCase().replace(/-/g, '_');
    if (!(CREDENTIAL_TYPES as readonly string[]).includes(type) || type === 'OAUTH2' || type === 'OAUTH1') {
      throw new AppError('invalid_uri_params', `No form flow for credential type "${params.type}"`, {
        errors: [{ code: 'invalid_value', message: 'a form-based credential type', path: 'type' }],
      });
    }
    return save(deps, session.token, params.integration, type, body);
  },
});
