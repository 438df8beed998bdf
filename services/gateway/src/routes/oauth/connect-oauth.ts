import { z } from 'zod';
import { enteredConnectionConfigSchema, vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { SESSION_TOKEN_QUERY } from '../../http/authenticate.js';
import { defineRoute } from '../../http/define-route.js';

/** Where providers send end users back: the environment's callback URL, else ours. */
export async function redirectUri(deps: { config: { PUBLIC_URL: string }; environments: { findById(id: string): Promise<{ callback_url: string | null } | null> } }, environmentId: string) {
  const environment = await deps.environments.findById(environmentId);
  return environment?.callback_url ?? `${deps.config.PUBLIC_URL.replace(/\/+$/, '')}/oauth/callback`;
}

/**
 * `GET /oauth/connect/{integration}?connect_session_token=…`: sends the end user's browser to
 * the provider's authorization page. `params[k]=v` fill connection config; `authorization_params[k]=v`
 * are added to the authorization URL. An OAuth 1.0a start asks the provider for temporary
 * credentials first: its refusal, or a request URL that gave no answer (refused address
 * included, told as one: the vault's `forEndUser`), is 424 `refresh_token_external_error`.
 */
export const connectOAuth = defineRoute({
  method: 'get',
  path: '/oauth/connect/:integration',
  auth: 'connect_session',
  scope: null,
  doc: {
    summary: "Start an OAuth flow: redirects to the provider's authorization page",
    status: 302,
    errors: ['unknown_provider_config', 'refresh_token_external_error'],
  },
  schemas: {
    params: z.strictObject({ integration: z.string().min(1).max(128) }),
    query: z.strictObject({
      connect_session_token: z.string().min(1),
      params: enteredConnectionConfigSchema.optional(),
      authorization_params: z.record(z.string(), z.string()).optional(),
    }),
  },
  handler: async ({ deps, session, params, query, res }) => {
    const { url } = await deps.bus.request(vaultContracts.startOAuth, {
      token: session.token,
      integration: params.integration,
      redirect_uri: await redirectUri(deps, session.environment_id),
      ...(query.params ? { connection_config: query.params } : {}),
      ...(query.authorization_params ? { authorization_params: query.authorization_params } : {}),
    });
    res.redirect(302, url);
    return { streamed: true };
  },
});

/**
 * `POST /oauth/connect/{integration}` with the session token: the same start, answered as
 * `{url}` for the Connect UI to navigate to. The end user's own OAuth client travels here, in a
 * body, so that its secret never sits in a URL, a browser history or an access log.
 */
export const startOAuthFromPage = defineRoute({
  method: 'post',
  path: '/oauth/connect/:integration',
  auth: 'connect_session',
  scope: null,
  doc: {
    summary: "Start an OAuth flow from the page (the end user's own client in the body)",
    errors: ['unknown_provider_config', 'refresh_token_external_error'],
    answer: z.object({ url: z.string() }),
  },
  schemas: {
    params: z.strictObject({ integration: z.string().min(1).max(128) }),
    query: SESSION_TOKEN_QUERY,
    body: z.strictObject({
      connection_config: enteredConnectionConfigSchema.optional(),
      authorization_params: z.record(z.string(), z.string()).optional(),
      oauth_client_id_override: z.string().min(1).max(1024).optional(),
      oauth_client_secret_override: z.string().min(1).max(4096).optional(),
    }),
  },
  handler: async ({ deps, session, params, body }) => {
    const { oauth_client_id_override: clientId, oauth_client_secret_override: clientSecret } = body;
    if ((clientId === undefined) !== (clientSecret === undefined)) {
      throw new AppError('invalid_body', 'Give both the OAuth client id and its secret, or neither', {
        errors: [{ code: 'invalid_value', message: 'both or neither', path: clientId === undefined ? 'oauth_client_id_override' : 'oauth_client_secret_override' }],
      });
    }
    const { url } = await deps.bus.request(vaultContracts.startOAuth, {
      token: session.token,
      integration: params.integration,
      redirect_uri: await redirectUri(deps, session.environment_id),
      ...(body.connection_config ? { connection_config: body.connection_config } : {}),
      ...(body.authorization_params ? { authorization_params: body.authorization_params } : {}),
      ...(clientId !== undefined && clientSecret !== undefined ? { client_override: { client_id: clientId, client_secret: clientSecret } } : {}),
    });
    return { body: { url } };
  },
});
