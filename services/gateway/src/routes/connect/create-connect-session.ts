import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';
import type { GatewayDeps } from '../../http/deps.js';

/** The session request as customers send it: the vault's, less what the key decides. */
export const sessionBody = vaultContracts.createConnectSession.request.omit({ environment_id: true, reconnect: true }).strict();

/** The 201 answer for a new session: its token, `connect_link` (the Connect UI with `session_token`) and expiry. */
export function sessionCreated(deps: Pick<GatewayDeps, 'config'>, session: { token: string; expires_at: string }) {
  const link = new URL(deps.config.CONNECT_URL ?? `${deps.config.PUBLIC_URL.replace(/\/+$/, '')}/connect`);
  link.searchParams.set('session_token', session.token);
  return { status: 201, body: { data: { token: session.token, connect_link: link.toString(), expires_at: session.expires_at } } };
}

/** A 30-minute session for one end user's connect flow. */
export const createConnectSession = defineRoute({
  method: 'post',
  path: '/connect/sessions',
  auth: 'api_key',
  scope: 'environment:connect_sessions:write',
  doc: {
    summary: 'Create a connect session for an end user',
    status: 201,
    errors: ['unknown_provider_config'],
    answer: z.object({ data: z.object({ token: z.string(), connect_link: z.string(), expires_at: z.string() }) }),
  },
  schemas: { body: sessionBody },
  handler: async ({ deps, key, body }) => {
    return sessionCreated(deps, await deps.bus.request(vaultContracts.createConnectSession, { ...body, environment_id: key.environmentId }));
  },
});

export const reconnectBody = sessionBody
  .omit({ allowed_integrations: true, overrides: true })
  .extend({ connection_id: z.string().min(1).max(255), integration_id: z.string().min(1).max(128) })
  .strict();
