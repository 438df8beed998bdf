import { randomUUID } from 'node:crypto';
import { callerOf, type BusMessage } from '@latchkey/bus';
import { vaultContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import { checkHostValues } from '../catalog/provider-url.js';
import type { ConnectionDoc } from '../db/connection-model.js';
import { checkSecretHostsNamed } from '../domain/connect-sessions.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import type { VaultServices } from '../domain/vault-services.js';
import { connectionEvent, connectionListItem, connectionView, normalizeTags } from '../domain/views.js';

/**
 * A fetch answers with its own time as `last_fetched_at` (it is the latest fetch), so the value
 * never goes back and no replica lags; the stored copy is written behind, at most this often per
 * connection and replica, and never back (`stampFetched`: another replica's later stamp may have
 * landed first).
 */
const FETCH_STAMP_MS = 10_000;

/** `POST /connections`: imports credentials of any type for an existing integration. */
export function createConnectionHandler(deps: Pick<VaultDeps, 'bus' | 'providers' | 'audit'> & Pick<VaultServices, 'integrationService' | 'connectionService'>) {
  return async (request: RequestOf<typeof vaultContracts.createConnection>, msg: Pick<BusMessage, 'subject'>) => {
    const environment = environmentId(request.environment_id);
    const integration = await deps.integrationService.find(environment, request.provider_config_key);
    const provider = deps.providers.get(integration.provider);
    const credentials = request.credentials;
    const type = credentials.type;
    const expected = provider?.auth_mode;
    if (expected && expected !== type) {
      throw new AppError('invalid_body', `Integration "${integration.unique_key}" takes ${expected} credentials, not ${type}`, {
        errors: [{ code: 'invalid_value', message: `expected ${expected}`, path: 'credentials.type' }],
      });
    }
    const connectionConfig = request.connection_config ?? {};
    const missing = (provider?.connection_configuration ?? []).filter((key) => connectionConfig[key] === undefined);
    if (missing.length > 0) {
      throw new AppError('invalid_body', `connection_config lacks ${missing.join(', ')}`, {
        errors: missing.map((key) => ({ code: 'required', message: 'required by the provider', path: `connection_config.${key}` })),
      });
    }
    // Host-bearing values are checked now, not found wrong at each refresh (answered 400 then).
    if (provider) checkHostValues(provider, connectionConfig);
    // An OAuth 2 connection is refreshed with the integration's client, unless it brings its own;
    // an APP one always is, with a JWT the integration's private key signs (the App, to whoever
    // holds it, for every installation).
    if (!request.reads_client_secrets) {
      const own = credentials.type === 'OAUTH2' ? credentials.config_override : undefined;
      if (credentials.type === 'APP' || (credentials.type === 'OAUTH2' && !(own?.client_id && own.client_secret))) checkSecretHostsNamed(provider, connectionConfig);
    }
    if (request.metadata) checkMetadataSize(request.metadata);
    const doc = await deps.connectionService.insert(environment, integration, credentials, {
      connection_id: request.connection_id ?? randomUUID(),
      metadata: request.metadata ?? {},
      connection_config: connectionConfig,
      tags: normalizeTags(request.tags),
      end_user: request.end_user ?? null,
      created_via_session: false,
    });
    // As for a read: the plaintext is answered once its audit record is stored.
    if (request.include_credentials) await deps.audit.record({ environment_id: request.environment_id, connection: doc._id, key_id: request.reader.key_id, caller: callerOf(vaultContracts.createConnection, msg), purpose: 'import' });
    return connectionView(doc, request.include_credentials ? credentials : undefined, true);
  };
}

export function listConnectionsHandler(deps: Pick<VaultDeps, 'connections' | 'integrations'>) {
  return async (request: RequestOf<typeof vaultContracts.listConnections>) => {
    // By connection id: one key lookup per integration of the environment (see the repo's list).
    const integrationKeys =
      request.connection_id !== undefined && request.integration_ids === undefined
        ? (await deps.integrations.list(environmentId(request.environment_id))).map((integration) => integration.unique_key)
        : undefined;
    const docs = await deps.connections.list(
      environmentId(request.environment_id),
      {
        ...(request.connection_id === undefined ? {} : { connection_id: request.connection_id }),
        ...(request.integration_ids === undefined ? {} : { provider_config_keys: request.integration_ids }),
        ...(request.tags === undefined ? {} : { tags: normalizeTags(request.tags) }),
        ...(request.end_user_id === undefined ? {} : { end_user_id: request.end_user_id }),
        ...(request.search === undefined ? {} : { search: request.search }),
      },
      { limit: request.limit, page: request.page },
      integrationKeys,
    );
    return docs.map(connectionListItem);
  };
}

/** An integration's connections by name, for the scheduler's walk over all of them (see the contract). */
export function integrationConnectionsHandler(deps: Pick<VaultDeps, 'connections'>) {
  return async (request: RequestOf<typeof vaultContracts.integrationConnections>) => {
    return deps.connections.integrationPage(environmentId(request.environment_id), request.provider_config_key, request.before, request.limit);
  };
}

/**
 * `GET /connections/{id}`: from the replica's cache, else one indexed read and a decryption; a
 * refresh only inside the window (or when forced), under the per-connection lock; plaintext
 * only for a credentials scope, and then audited.
 */
export function getConnectionHandler(deps: Pick<VaultDeps, 'connections' | 'logger' | 'audit'> & Pick<VaultServices, 'connectionService'>) {
  const stamped = new Map<string, number>();
  return async (request: RequestOf<typeof vaultContracts.getConnection>, msg: Pick<BusMessage, 'subject'>) => {
    // A refresh token is shown to customers who ask (`?refresh_token=true`); functions never get one.
    if (request.include_refresh_token && callerOf(vaultContracts.getConnection, msg) !== 'gateway') {
      throw new AppError('forbidden', 'Only the gateway reads a refresh token');
    }
    const environment = environmentId(request.environment_id);
    let { doc, credentials } = await deps.connectionService.fetch({
      environment_id: request.environment_id,
      provider_config_key: request.provider_config_key,
      connection_id: request.connection_id,
      force: request.force_refresh,
      vendorJwt: request.refresh_vendor_app_jwt_token,
    });

    const now = Date.now();
    const fetchedAt = new Date(now);
    doc = { ...doc, last_fetched_at: fetchedAt };
    if ((stamped.get(doc._id) ?? 0) + FETCH_STAMP_MS < now) {
      if (stamped.size >= 100_000) stamped.clear(); // a memory bound; the worst case is one early stamp
      stamped.set(doc._id, now);
      void deps.connections.stampFetched(environment, doc._id, fetchedAt).catch((error: unknown) =>
        deps.logger.warn('could not stamp last_fetched_at', { error }),
      );
    }
    if (!request.include_credentials) return connectionView(doc);
    await deps.audit.record({ environment_id: request.environment_id, connection: doc._id, key_id: request.reader.key_id, caller: callerOf(vaultContracts.getConnection, msg), purpose: 'fetch' });
    return connectionView(doc, credentials, request.include_refresh_token);
  };
}

export function resolveConnectionHandler(deps: Pick<VaultServices, 'connectionService'>) {
  return async (request: RequestOf<typeof vaultContracts.resolveConnection>) => {
    const doc = await deps.connectionService.find(environmentId(request.environment_id), request.provider_config_key, request.connection_id);
    return { id: doc.id, connection_id: doc.connection_id, provider_config_key: doc.provider_config_key, provider: doc.provider };
  };
}

export function patchConnectionHandler(deps: Pick<VaultDeps, 'connections' | 'bus'> & Pick<VaultServices, 'connectionService'>) {
  return async (request: RequestOf<typeof vaultContracts.patchConnection>) => {
    const environment = environmentId(request.environment_id);
    const doc = await deps.connectionService.find(environment, request.provider_config_key, request.connection_id);
    const fields: Partial<ConnectionDoc> = { updated_at: new Date() };
    if (request.tags !== undefined) fields.tags = normalizeTags(request.tags);
    if (request.end_user !== undefined) fields.end_user = request.end_user;
    await deps.connections.update(environment, doc._id, fields);
    await deps.bus.publish(vaultContracts.connectionUpdated, connectionEvent(doc));
    return { success: true as const };
  };
}

export function deleteConnectionHandler(deps: Pick<VaultServices, 'connectionService'>) {
  return async (request: RequestOf<typeof vaultContracts.deleteConnection>) => {
    const environment = environmentId(request.environment_id);
    const doc = await deps.connectionService.find(environment, request.provider_config_key, request.connection_id);
    await deps.connectionService.remove(environment, doc);
    return { success: true as const };
  };
}

/** What one connection's metadata may weigh, as JSON text. */
export const MAX_METADATA_BYTES = 64 * 1024;

/**
 * Refuses metadata past `MAX_METADATA_BYTES`. Merges add keys one write at a time: without a
 * bound on the result, a connection's document would grow to the database's 16 MiB, and a page
 * of 1,000 such connections would load 16 GiB into a vault replica that serves every tenant.
 */
function checkMetadataSize(metadata: Record<string, unknown>): void {
  const bytes = Buffer.byteLength(JSON.stringify(metadata));
  if (bytes <= MAX_METADATA_BYTES) return;
  throw new AppError('invalid_body', `A connection's metadata may be at most ${MAX_METADATA_BYTES} bytes of JSON (this would be ${bytes})`, {
    errors: [{ code: 'too_big', message: `at most ${MAX_METADATA_BYTES} bytes of JSON`, path: 'metadata' }],
  });
}

/**
 * Sets (replace) or updates (shallow merge) metadata of one or many connections. Every
 * connection must exist, and every result fit `MAX_METADATA_BYTES`, before anything changes.
 */
export function writeMetadataHandler(deps: Pick<VaultDeps, 'connections' | 'bus'> & Pick<VaultServices, 'integrationService'>) {
  return async (request: RequestOf<typeof vaultContracts.writeMetadata>) => {
    const environment = environmentId(request.environment_id);
    await deps.integrationService.find(environment, request.provider_config_key);
    const ids = [...new Set(request.connection_ids)];
    const docs = await deps.connections.findMany(environment, request.provider_config_key, ids);
    const found = new Set(docs.map((doc) => doc.connection_id));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length > 0) throw new AppError('unknown_connection', `No connection ${missing.map((id) => `"${id}"`).join(', ')} in "${request.provider_config_key}"`);
    for (const doc of docs) checkMetadataSize(request.mode === 'replace' ? request.metadata : { ...doc.metadata, ...request.metadata });
    for (const doc of docs) {
      // Merge sets each key on its own path; writes to one connection run one at a time (serialized-writes).
      const update =
        request.mode === 'replace'
          ? { metadata: request.metadata }
          : Object.fromEntries(Object.entries(request.metadata).map(([key, value]) => [`metadata.${key}`, value]));
      await deps.connections.update(environment, doc._id, { ...update, updated_at: new Date() } as Partial<ConnectionDoc>);
      await deps.bus.publish(vaultContracts.connectionUpdated, connectionEvent(doc));
    }
    return { success: true as const };
  };
}
