import { randomInt, randomUUID } from 'node:crypto';
import { callerOf, type BusMessage } from '@latchkey/bus';
import { vaultContracts, webhookContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { z } from 'zod';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { VaultDeps } from '../domain/vault-deps.js';
import { connectionEvent, connectionListItem, connectionView, expiryOf, normalizeTags } from '../domain/views.js';
import { findIntegration } from './integrations.js';

export const CREDENTIALS_PLACE = (doc: Pick<ConnectionDoc, '_id'>) => ({ connectionId: doc._id, field: 'connection.credentials' });

/** Stores a new connection: fresh ids, the credentials encrypted for it, no errors yet. */
export async function insertConnection(
  deps: Pick<VaultDeps, 'connections' | 'cipher'>,
  environment: EnvironmentId,
  integration: Pick<IntegrationDoc, '_id' | 'unique_key' | 'provider'>,
  credentials: Record<string, unknown>,
  fields: Pick<ConnectionDoc, 'connection_id' | 'metadata' | 'connection_config' | 'tags' | 'end_user' | 'created_via_session'>,
): Promise<ConnectionDoc> {
  const id = `conn_${randomUUID()}`;
  const now = new Date();
  return deps.connections.insert(environment, {
    _id: id,
    id: randomInt(1, 2 ** 47),
    integration_id: integration._id,
    provider_config_key: integration.unique_key,
    provider: integration.provider,
    credentials_type: String(credentials['type']),
    credentials: await deps.cipher.encryptJson(environment, CREDENTIALS_PLACE({ _id: id }), credentials),
    credentials_version: 0,
    expires_at: expiryOf(credentials),
    errors: [],
    refresh_failure: null,
    created_at: now,
    updated_at: now,
    last_fetched_at: null,
    ...fields,
  });
}

/**
 * A fetch answers with its own time as `last_fetched_at` (it is the latest fetch), so the value
 * never goes back and no replica lags; the stored copy is written behind, at most this often per
 * connection and replica.
 */
const FETCH_STAMP_MS = 10_000;

/** The connection, or `unknown_provider_config` / `unknown_connection`, whichever is missing. */
async function findConnection(deps: Pick<VaultDeps, 'connections' | 'integrations'>, environment: EnvironmentId, providerConfigKey: string, connectionId: string) {
  const doc = await deps.connections.find(environment, providerConfigKey, connectionId);
  if (doc) return doc;
  await findIntegration(deps, environment, providerConfigKey);
  throw new AppError('unknown_connection', `No connection "${connectionId}" in integration "${providerConfigKey}"`);
}

const storedCredentials = z.record(z.string(), z.unknown());

export async function decryptCredentials(deps: Pick<VaultDeps, 'cipher'>, doc: ConnectionDoc): Promise<Record<string, unknown>> {
  return deps.cipher.decryptJson(environmentId(doc.environment_id), CREDENTIALS_PLACE(doc), doc.credentials, storedCredentials);
}

/** `POST /connections`: imports credentials of any type for an existing integration. */
export function createConnectionHandler(deps: VaultDeps) {
  return async (request: RequestOf<typeof vaultContracts.createConnection>, msg: Pick<BusMessage, 'subject'>) => {
    const environment = environmentId(request.environment_id);
    const integration = await findIntegration(deps, environment, request.provider_config_key);
    const provider = deps.providers.get(integration.provider);
    const credentials = request.credentials as Record<string, unknown>;
    const type = String(credentials['type']);
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
    const doc = await insertConnection(deps, environment, integration, credentials, {
      connection_id: request.connection_id ?? randomUUID(),
      metadata: request.metadata ?? {},
      connection_config: connectionConfig,
      tags: normalizeTags(request.tags),
      end_user: request.end_user ?? null,
      created_via_session: false,
    });
    await deps.bus.publish(vaultContracts.connectionCreated, connectionEvent(doc));
    await deps.bus.publish(webhookContracts.postCreation, { ...connectionEvent(doc), tags: doc.tags, end_user: doc.end_user });
    if (request.include_credentials) deps.audit.record({ environment_id: request.environment_id, connection: doc._id, key_id: request.reader.key_id, caller: callerOf(vaultContracts.createConnection, msg), purpose: 'import' });
    return connectionView(doc, request.include_credentials ? credentials : undefined, true);
  };
}

export function listConnectionsHandler(deps: VaultDeps) {
  return async (request: RequestOf<typeof vaultContracts.listConnections>) => {
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
    );
    return docs.map(connectionListItem);
  };
}

/**
 * A connection with its decrypted credentials: from the replica's cache, else one indexed read
 * and a decryption; refreshed first when inside the window (or forced), under the lock.
 */
export async function fetchConnection(
  deps: VaultDeps,
  request: { environment_id: string; provider_config_key: string; connection_id: string; force: boolean; vendorJwt: boolean },
): Promise<{ doc: ConnectionDoc; credentials: Record<string, unknown> }> {
  const flags = { force: request.force, vendorJwt: request.vendorJwt };
  const cached = deps.cache.get(request.environment_id, request.provider_config_key, request.connection_id);
  if (cached) return deps.refresher.ensureFresh(cached.doc, cached.credentials, flags);
  const readAt = deps.cache.generation();
  const doc = await findConnection(deps, environmentId(request.environment_id), request.provider_config_key, request.connection_id);
  const credentials = await decryptCredentials(deps, doc);
  deps.cache.set(doc, credentials, readAt);
  return deps.refresher.ensureFresh(doc, credentials, flags);
}

/**
 * `GET /connections/{id}`: from the replica's cache, else one indexed read and a decryption; a
 * refresh only inside the window (or when forced), under the per-connection lock; plaintext
 * only for a credentials scope, and then audited.
 */
export function getConnectionHandler(deps: VaultDeps) {
  const stamped = new Map<string, number>();
  return async (request: RequestOf<typeof vaultContracts.getConnection>, msg: Pick<BusMessage, 'subject'>) => {
    const environment = environmentId(request.environment_id);
    let { doc, credentials } = await fetchConnection(deps, {
      environment_id: request.environment_id,
      provider_config_key: request.provider_config_key,
      connection_id: request.connection_id,
      force: request.force_refresh,
      vendorJwt: request.refresh_vendor_app_jwt_token,
    });

    const now = Date.now();
    doc = { ...doc, last_fetched_at: new Date(now) };
    if ((stamped.get(doc._id) ?? 0) + FETCH_STAMP_MS < now) {
      if (stamped.size >= 100_000) stamped.clear(); // a memory bound; the worst case is one early stamp
      stamped.set(doc._id, now);
      void deps.connections.update(environment, doc._id, { last_fetched_at: doc.last_fetched_at }).catch((error: unknown) =>
        deps.logger.warn('could not stamp last_fetched_at', { error }),
      );
    }
    if (!request.include_credentials) return connectionView(doc);
    await deps.audit.record({ environment_id: request.environment_id, connection: doc._id, key_id: request.reader.key_id, caller: callerOf(vaultContracts.getConnection, msg), purpose: 'fetch' });
    return connectionView(doc, credentials, request.include_refresh_token);
  };
}

export function resolveConnectionHandler(deps: Pick<VaultDeps, 'connections' | 'integrations'>) {
  return async (request: RequestOf<typeof vaultContracts.resolveConnection>) => {
    const doc = await findConnection(deps, environmentId(request.environment_id), request.provider_config_key, request.connection_id);
    return { id: doc.id, connection_id: doc.connection_id, provider_config_key: doc.provider_config_key, provider: doc.provider };
  };
}

export function patchConnectionHandler(deps: VaultDeps) {
  return async (request: RequestOf<typeof vaultContracts.patchConnection>) => {
    const environment = environmentId(request.environment_id);
    const doc = await findConnection(deps, environment, request.provider_config_key, request.connection_id);
    const fields: Partial<ConnectionDoc> = { updated_at: new Date() };
    if (request.tags !== undefined) fields.tags = normalizeTags(request.tags);
    if (request.end_user !== undefined) fields.end_user = request.end_user;
    await deps.connections.update(environment, doc._id, fields);
    await deps.bus.publish(vaultContracts.connectionUpdated, connectionEvent(doc));
    return { success: true as const };
  };
}

/** How long a deletion waits, at most, for JetStream to store its `connection.pre_deletion`. */
const PRE_DELETION_WAIT_MS = 1000;

/**
 * Announces `connection.pre_deletion` for the functions runtime (which may, say, remove a
 * provider subscription). A deletion never fails and never waits long because of it: a lost or
 * late announcement is logged and the deletion goes on.
 */
export async function announcePreDeletion(deps: Pick<VaultDeps, 'bus' | 'logger'>, doc: ConnectionDoc): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const announced = deps.bus.publish(webhookContracts.preDeletion, { ...connectionEvent(doc), tags: doc.tags }).then(
    () => true,
    (error: unknown) => {
      deps.logger.warn('could not announce connection.pre_deletion; deleting anyway', { connection: doc._id, error });
      return true;
    },
  );
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PRE_DELETION_WAIT_MS)));
  if (!(await Promise.race([announced, late]))) deps.logger.warn('connection.pre_deletion is late; deleting anyway', { connection: doc._id });
  clearTimeout(timer);
}

export function deleteConnectionHandler(deps: VaultDeps) {
  return async (request: RequestOf<typeof vaultContracts.deleteConnection>) => {
    const environment = environmentId(request.environment_id);
    const doc = await findConnection(deps, environment, request.provider_config_key, request.connection_id);
    await announcePreDeletion(deps, doc);
    await deps.connections.remove(environment, doc._id);
    await deps.bus.publish(vaultContracts.connectionDeleted, connectionEvent(doc));
    return { success: true as const };
  };
}

/**
 * Sets (replace) or updates (shallow merge) metadata of one or many connections. Every
 * connection must exist before anything changes.
 */
export function writeMetadataHandler(deps: VaultDeps) {
  return async (request: RequestOf<typeof vaultContracts.writeMetadata>) => {
    const environment = environmentId(request.environment_id);
    await findIntegration(deps, environment, request.provider_config_key);
    const ids = [...new Set(request.connection_ids)];
    const docs = await deps.connections.findMany(environment, request.provider_config_key, ids);
    const found = new Set(docs.map((doc) => doc.connection_id));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length > 0) throw new AppError('unknown_connection', `No connection ${missing.map((id) => `"${id}"`).join(', ')} in "${request.provider_config_key}"`);
    for (const doc of docs) {
      // Merge sets each key on its own path: atomic per key, no read-modify-write.
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
