import { z } from 'zod';
import { CREDENTIAL_TYPES, enteredConnectionConfigSchema, NOT_TYPED_IN, vaultContracts, type CredentialType, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { SESSION_TOKEN_QUERY } from '../../http/authenticate.js';
import { defineRoute } from '../../http/define-route.js';
import type { GatewayDeps } from '../../http/deps.js';

const integrationParams = z.strictObject({ integration: z.string().min(1).max(128) });

/**
 * Credential fields as an end user enters them, plus the connection config the provider asks
 * for: text per field, as on the OAuth routes (the vault checks each against its pattern).
 */
const formBody = z.object({ connection_config: enteredConnectionConfigSchema.optional() }).catchall(z.unknown());

/** Hands the fields to the vault, which checks them against the type's schema and saves them. */
async function save(deps: GatewayDeps, token: string, integration: string, type: string, body: z.output<typeof formBody>) {
  const { connection_config: connectionConfig, ...fields } = body;
  if (type === 'OAUTH2_CC') {
    // The client buys its token at the provider before anything is saved.
    const { client_id: clientId, client_secret: clientSecret, ...rest } = fields;
    const unknown = Object.keys(rest);
    if (typeof clientId !== 'string' || typeof clientSecret !== 'string' || unknown.length > 0) {
      throw new AppError('invalid_body', 'OAuth 2 client credentials take client_id and client_secret', {
        errors: [
          ...(typeof clientId === 'string' && clientId ? [] : [{ code: 'invalid_type', message: 'a client id', path: 'client_id' }]),
          ...(typeof clientSecret === 'string' && clientSecret ? [] : [{ code: 'invalid_type', message: 'a client secret', path: 'client_secret' }]),
          ...unknown.map((name) => ({ code: 'unrecognized_keys', message: 'not a field of this form', path: name })),
        ],
      });
    }
    const saved = await deps.bus.request(vaultContracts.connectClientCredentials, {
      token,
      integration,
      client_id: clientId,
      client_secret: clientSecret,
      ...(connectionConfig === undefined ? {} : { connection_config: connectionConfig }),
    });
    return { body: { connectionId: saved.connectionId, providerConfigKey: saved.providerConfigKey } };
  }
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
    doc: {
      summary: `Save the end user's ${type === 'API_KEY' ? 'API key' : 'username and password'} for the session`,
      answer: z.object({ connectionId: z.string(), providerConfigKey: z.string() }),
      errors: ['unknown_provider_config', 'connection_test_failed', 'upstream_not_allowed'],
    },
    schemas: { params: integrationParams, query: SESSION_TOKEN_QUERY, body: formBody },
    handler: ({ deps, session, params, body }) => save(deps, session.token, params.integration, type, body),
  });
}

/** The end user's API key for an API_KEY integration: `{apiKey, connection_config?}`. */
export const saveApiKey = saveCredentials('API_KEY', '/api-auth/api-key/:integration');

/** The end user's username and password for a BASIC integration. */
export const saveBasic = saveCredentials('BASIC', '/api-auth/basic/:integration');

/**
 * Any other form-based type: `/auth/{type}/{integration}` with that type's fields;
 * `/auth/oauth2_cc/{integration}` takes `{client_id, client_secret}` and obtains the token.
 */
export const saveTypedCredentials = defineRoute({
  method: 'post',
  path: '/auth/:type/:integration',
  auth: 'connect_session',
  scope: null,
  doc: {
    summary: 'Save credentials of a form-based type for the session',
    errors: ['unknown_provider_config', 'connection_test_failed', 'upstream_not_allowed'],
    answer: z.object({ connectionId: z.string(), providerConfigKey: z.string() }),
  },
  schemas: {
    params: z.strictObject({ type: z.string().min(1).max(32), integration: z.string().min(1).max(128) }),
    query: SESSION_TOKEN_QUERY,
    body: formBody,
  },
  handler: async ({ deps, session, params, body }) => {
    const type = params.type.toUpperCase().replace(/-/g, '_');
    // OAUTH2_CC has a form (client id and secret), whose token is bought before anything is saved.
    if (!(CREDENTIAL_TYPES as readonly string[]).includes(type) || (NOT_TYPED_IN.has(type) && type !== 'OAUTH2_CC')) {
      throw new AppError('invalid_uri_params', `No form flow for credential type "${params.type}"`, {
        errors: [{ code: 'invalid_value', message: 'a form-based credential type', path: 'type' }],
      });
    }
    return save(deps, session.token, params.integration, type, body);
  },
});
