import { randomInt, randomUUID } from 'node:crypto';
import { vaultContracts, webhookContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import { settledWithin } from '@latchkey/runtime';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { ConnectionRepo } from '../db/connection-repo.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { ConnectionCredentials, StoredCredentials } from './connection-credentials.js';
import type { IntegrationService } from './integrations.js';
import type { VaultDeps } from './vault-deps.js';
import type { LifecycleEvent, LifecycleEvents } from './lifecycle-events.js';
import { connectionEvent, expiryOf } from './views.js';

/** How long a deletion waits, at most, for JetStream to store its `connection.pre_deletion`. */
const PRE_DELETION_WAIT_MS = 1000;

/**
 * Announces `connection.pre_deletion` for the functions runtime (which may, say, remove a
 * provider subscription). A deletion never fails and never waits long because of it: a lost or
 * late announcement is logged and the deletion goes on.
 */
export async function announcePreDeletion(deps: Pick<VaultDeps, 'bus' | 'logger'>, doc: ConnectionDoc): Promise<void> {
  const announced = deps.bus
    .publish(webhookContracts.preDeletion, { ...connectionEvent(doc), tags: doc.tags })
    .catch((error: unknown) => deps.logger.warn('could not announce connection.pre_deletion; deleting anyway', { connection: doc._id, error }));
  if (!(await settledWithin(announced, PRE_DELETION_WAIT_MS))) deps.logger.warn('connection.pre_deletion is late; deleting anyway', { connection: doc._id });
}

type NewConnectionArgs = [
  environment: EnvironmentId,
  integration: Pick<IntegrationDoc, '_id' | 'unique_key' | 'provider'>,
  credentials: StoredCredentials,
  fields: Pick<ConnectionDoc, 'connection_id' | 'metadata' | 'connection_config' | 'tags' | 'end_user' | 'created_via_session'>,
];

/** A new connection, not yet stored: fresh ids, the credentials encrypted for it, no errors yet. */
export async function newConnection(
  deps: { credentials: Pick<ConnectionCredentials, 'seal'> },
  ...[environment, integration, credentials, fields]: NewConnectionArgs
): Promise<ConnectionDoc> {
  const id = `conn_${randomUUID()}`;
  const now = new Date();
  return {
    _id: id,
    environment_id: environment,
    id: randomInt(1, 2 ** 47),
    integration_id: integration._id,
    provider_config_key: integration.unique_key,
    provider: integration.provider,
    credentials_type: credentials.type,
    credentials: await deps.credentials.seal({ _id: id, environment_id: environment }, credentials),
    credentials_version: 0,
    expires_at: expiryOf(credentials),
    errors: [],
    refresh_failure: null,
    created_at: now,
    updated_at: now,
    last_fetched_at: null,
    ...fields,
  };
}

/** What a creation announces: `connection.created` (as `created` shapes it), then `connection.post_creation`. */
export function creationEvents(doc: ConnectionDoc, created: LifecycleEvent['payload'] = connectionEvent(doc)): LifecycleEvent[] {
  return [
    { contract: vaultContracts.connectionCreated, payload: created },
    { contract: webhookContracts.postCreation, payload: { ...connectionEvent(doc), tags: doc.tags, end_user: doc.end_user } },
  ];
}

type InsertDeps = {
  connections: Pick<ConnectionRepo, 'insert'>;
  credentials: Pick<ConnectionCredentials, 'seal'>;
  lifecycle: Pick<LifecycleEvents, 'announce'>;
  integrations: Pick<IntegrationService, 'storing'>;
};

/**
 * Stores a new connection and announces it (`events`, kept in the outbox first: never one without
 * the other). Its integration, found before, may have been renamed or deleted since: the
 * connection is stored only while the integration still holds its key (`storing`).
 */
export async function insertConnection(
  deps: InsertDeps,
  ...[environment, integration, credentials, fields, events]: [...NewConnectionArgs, events: (doc: ConnectionDoc) => LifecycleEvent[]]
): Promise<ConnectionDoc> {
  const doc = await newConnection(deps, environment, integration, credentials, fields);
  return deps.lifecycle.announce(doc, { when: 'present' }, events(doc), () =>
    deps.connections.insert(environment, doc, (store) => deps.integrations.storing(environment, integration, store)),
  );
}

export interface ConnectionServiceDeps extends Pick<VaultDeps, 'bus' | 'logger' | 'cache' | 'refresher'> {
  connections: Pick<ConnectionRepo, 'find' | 'insert' | 'remove'>;
  lifecycle: Pick<LifecycleEvents, 'announce'>;
  integrations: Pick<IntegrationService, 'find' | 'storing'>;
  credentials: ConnectionCredentials;
}

/** Where a fetch comes from: the connection, and whether a refresh is forced. */
export interface FetchRequest {
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  force: boolean;
  vendorJwt: boolean;
}

/** The rules every part of the vault shares about connections: storing, finding, fetching fresh, deleting. */
export function createConnectionService(deps: ConnectionServiceDeps) {
  /** The connection, or `unknown_provider_config` / `unknown_connection`, whichever is missing. */
  async function find(environment: EnvironmentId, providerConfigKey: string, connectionId: string): Promise<ConnectionDoc> {
    const doc = await deps.connections.find(environment, providerConfigKey, connectionId);
    if (doc) return doc;
    await deps.integrations.find(environment, providerConfigKey);
    throw new AppError('unknown_connection', `No connection "${connectionId}" in integration "${providerConfigKey}"`);
  }

  return {
    find,

    insert: (...args: NewConnectionArgs) => insertConnection(deps, ...args, (doc) => creationEvents(doc)),

    /**
     * A connection with its decrypted credentials: from the replica's cache, else one indexed read
     * and a decryption; refreshed first when inside the window (or forced), under the lock.
     */
    async fetch(request: FetchRequest): Promise<{ doc: ConnectionDoc; credentials: StoredCredentials }> {
      const flags = { force: request.force, vendorJwt: request.vendorJwt };
      const cached = deps.cache.get(request.environment_id, request.provider_config_key, request.connection_id);
      // The cache holds only what `open` returned, below.
      if (cached) return deps.refresher.ensureFresh(cached.doc, cached.credentials as StoredCredentials, flags);
      const readAt = deps.cache.generation();
      const doc = await find(environmentId(request.environment_id), request.provider_config_key, request.connection_id);
      const credentials = await deps.credentials.open(doc);
      deps.cache.set(doc, credentials, readAt);
      return deps.refresher.ensureFresh(doc, credentials, flags);
    },

    /** Deletes a connection: `connection.pre_deletion` first (never waited on long), then `connection.deleted`. */
    async remove(environment: EnvironmentId, doc: ConnectionDoc): Promise<void> {
      await announcePreDeletion(deps, doc);
      const removed = await deps.lifecycle.announce(doc, { when: 'absent' }, [{ contract: vaultContracts.connectionDeleted, payload: connectionEvent(doc) }], () =>
        deps.connections.remove(environment, doc._id),
      );
      if (removed) await deps.refresher.forget(doc).catch(() => deps.logger.warn('could not drop the refresh answer kept for a deleted connection', { connection: doc._id }));
    },
  };
}

export type ConnectionService = ReturnType<typeof createConnectionService>;
