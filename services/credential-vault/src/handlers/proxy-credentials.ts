import { callerOf, type BusMessage } from '@latchkey/bus';
import { proxyContracts, type ProxyCredentials, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import type { Provider } from '../catalog/provider-schema.js';
import { injectionFor } from '../domain/credential-injection.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';

type Deps = Pick<VaultDeps, 'audit'> & Pick<VaultServices, 'connectionService' | 'integrationService'> & { catalog: { get(name: string): Provider | undefined } };

/**
 * `vault.credentials.get`: how to call the provider for a connection, with the token refreshed
 * first when it is inside the window (or on `force_refresh`, after a 401). One of the two places
 * plaintext credentials leave the vault; every answer is audited.
 */
export function proxyCredentialsHandler(deps: Deps) {
  return async (request: RequestOf<typeof proxyContracts.getCredentials>, msg: Pick<BusMessage, 'subject'>): Promise<ProxyCredentials> => {
    // Who asks is the identity NATS authenticated for this subject; the payload only vouches for a key.
    const caller = callerOf(proxyContracts.getCredentials, msg);
    const { doc, credentials } = await deps.connectionService.fetch({
      environment_id: request.environment_id,
      provider_config_key: request.provider_config_key,
      connection_id: request.connection_id,
      force: request.force_refresh,
      vendorJwt: false,
    });
    const provider = deps.catalog.get(doc.provider);
    if (!provider) throw new AppError('unknown_provider', `Provider "${doc.provider}" is no longer in the catalog`);
    const integration = await deps.integrationService.find(environmentId(request.environment_id), request.provider_config_key);
    const client = await deps.integrationService.clientCredentials(integration);
    await deps.audit.record({ environment_id: request.environment_id, connection: doc._id, key_id: request.key_id, caller, purpose: 'proxy' });
    const injection = injectionFor(provider, client, doc.connection_config ?? {}, credentials);
    return {
      id: doc._id,
      provider: doc.provider,
      expires_at: doc.expires_at ? new Date(doc.expires_at).toISOString() : null,
      ...injection,
      allowed_hosts: [...(injection.allowed_hosts ?? []), ...(integration.allowed_hosts ?? [])],
    };
  };
}
