import { z } from 'zod';
import { vaultContracts, type RequestOf } from '@latchkey/contracts';
import type { ResolvedKey } from '../../domain/key-cache.js';
import type { GatewayDeps } from '../../http/deps.js';

/** The session request as customers send it: the vault's, less what the key decides. */
export const sessionBody = vaultContracts.createConnectSession.request.omit({ environment_id: true, reconnect: true, reads_client_secrets: true }).strict();

/** The answer `createSession` sends, for the API reference. */
export const sessionCreatedAnswer = z.object({ data: z.object({ token: z.string(), connect_link: z.string(), expires_at: z.string() }) });

/**
 * Creates the session in the key's environment (whether the key may name a self-hosted
 * provider's token host is the vault's to check) and answers 201 with its token, `connect_link`
 * (the Connect UI with `session_token`) and expiry.
 */
export async function createSession(
  deps: Pick<GatewayDeps, 'bus' | 'config'>,
  key: Pick<ResolvedKey, 'environmentId' | 'scopes'>,
  request: Omit<RequestOf<typeof vaultContracts.createConnectSession>, 'environment_id' | 'reads_client_secrets'>,
) {
  const session = await deps.bus.request(vaultContracts.createConnectSession, {
    ...request,
    environment_id: key.environmentId,
    reads_client_secrets: key.scopes.has('environment:integrations:read_credentials'),
  });
  const link = new URL(deps.config.CONNECT_URL ?? `${deps.config.PUBLIC_URL.replace(/\/+$/, '')}/connect`);
  link.searchParams.set('session_token', session.token);
  return { status: 201, body: { data: { token: session.token, connect_link: link.toString(), expires_at: session.expires_at } } };
}

/** The reconnect request: one connection made through a session, instead of the integrations to offer. */
export const reconnectBody = sessionBody
  .omit({ allowed_integrations: true, overrides: true })
  .extend({ connection_id: z.string().min(1).max(255), integration_id: z.string().min(1).max(128) })
  .strict();
