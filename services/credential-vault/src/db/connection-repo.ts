import type { Connection, QueryFilter } from 'mongoose';
import { AppError } from '@latchkey/errors';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { connectionModel, type ConnectionDoc, type SyncRunState } from './connection-model.js';

export interface ConnectionFilter {
  connection_id?: string;
  provider_config_keys?: string[];
  tags?: Record<string, string>;
  end_user_id?: string;
  search?: string;
}

/** What `update` may write: never the credentials or their version (see `replaceCredentials`). */
export type ConnectionFields = Partial<Omit<ConnectionDoc, '_id' | 'environment_id' | 'credentials' | 'credentials_version'>>;

/** The version a document holds; documents older than the field hold none, which counts as 0. */
export const credentialsVersionOf = (doc: Pick<ConnectionDoc, 'credentials_version'>): number => doc.credentials_version ?? 0;

function atVersion(version: number) {
  return version === 0 ? { $or: [{ credentials_version: 0 }, { credentials_version: { $exists: false } }] } : { credentials_version: version };
}

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function createConnectionRepo(connection: Connection) {
  const model = connectionModel(connection);
  const scoped = scopedRepo(model);
  return {
    init: () => model.init(),
    find: (environment: EnvironmentId, providerConfigKey: string, connectionId: string) =>
      scoped.findOne(environment, { provider_config_key: providerConfigKey, connection_id: connectionId }),
    findById: (environment: EnvironmentId, id: string) => scoped.findOne(environment, { _id: id }),
    async insert(environment: EnvironmentId, doc: Omit<ConnectionDoc, 'environment_id'>): Promise<ConnectionDoc> {
      try {
        return await scoped.insert(environment, doc);
      } catch (error) {
        if (isDuplicateKey(error)) {
          throw new AppError('invalid_body', `Connection "${doc.connection_id}" exists already in integration "${doc.provider_config_key}"`, {
            errors: [{ code: 'duplicate', message: 'connection_id is taken in this integration', path: 'connection_id' }],
          });
        }
        throw error;
      }
    },
    async list(environment: EnvironmentId, filter: ConnectionFilter, page: { limit: number; page: number }): Promise<ConnectionDoc[]> {
      const query: QueryFilter<Omit<ConnectionDoc, 'environment_id'>> = {};
      if (filter.connection_id !== undefined) query.connection_id = filter.connection_id;
      if (filter.provider_config_keys?.length) query.provider_config_key = { $in: filter.provider_config_keys };
      for (const [key, value] of Object.entries(filter.tags ?? {})) Object.assign(query, { [`tags.${key}`]: value });
      if (filter.end_user_id !== undefined) Object.assign(query, { 'end_user.id': filter.end_user_id });
      // Both may be given: an exact id and a search must both match.
      if (filter.search) Object.assign(query, { $and: [{ connection_id: { $regex: escapeRegex(filter.search), $options: 'i' } }] });
      return scoped.find(environment, query, { sort: { created_at: -1 }, limit: page.limit, skip: page.page * page.limit });
    },
    countForIntegration: (environment: EnvironmentId, integrationId: string) => scoped.count(environment, { integration_id: integrationId }),
    listForIntegration: (environment: EnvironmentId, integrationId: string) => scoped.find(environment, { integration_id: integrationId }),
    /** Fields other than the credentials; those change only through `replaceCredentials`. */
    update: (environment: EnvironmentId, id: string, fields: ConnectionFields) => scoped.updateOne(environment, { _id: id }, { $set: fields }),
    /**
     * Writes new credentials (and any other fields) only if the connection still holds
     * `readVersion`, bumping it: a compare-and-set on one document, which MongoDB 7 and FerretDB
     * both do atomically. False when another writer got there first; its credentials stay.
     */
    replaceCredentials: (environment: EnvironmentId, id: string, readVersion: number, fields: ConnectionFields & Pick<ConnectionDoc, 'credentials'>) =>
      scoped.updateOne(environment, { _id: id, ...atVersion(readVersion) }, { $set: { ...fields, credentials_version: readVersion + 1 } }),
    /** Fields written only while the connection still holds `readVersion` (a refresh failure must not mark newer tokens). */
    updateAtVersion: (environment: EnvironmentId, id: string, readVersion: number, fields: ConnectionFields) =>
      scoped.updateOne(environment, { _id: id, ...atVersion(readVersion) }, { $set: fields }),
    remove: (environment: EnvironmentId, id: string) => scoped.deleteOne(environment, { _id: id }),
    /**
     * Replaces the credentials blob only if it is still `previous`: a refresh that stored new
     * credentials meanwhile wins over a background re-encryption.
     */
    async swapCredentials(environment: EnvironmentId, id: string, previous: string, next: string): Promise<boolean> {
      return scoped.updateOne(environment, { _id: id, credentials: previous }, { $set: { credentials: next } });
    },
    listAll: (environment: EnvironmentId) => scoped.find(environment),
    /**
     * Records a finished sync run on its connection, unless a run of that sync and variant that
     * finished later is recorded already (events may arrive out of order). True when it changed.
     */
    recordSyncRun: (environment: EnvironmentId, id: string, key: string, state: SyncRunState) => {
      const path = `sync_runs.${key}`;
      return scoped.updateOne(
        environment,
        { _id: id, $or: [{ [`${path}.finished_at`]: { $exists: false } }, { [`${path}.finished_at`]: { $lt: state.finished_at } }] },
        { $set: { [path]: state } },
      );
    },
    /** Every environment that holds connections (key rotation walks them). */
    environments: () => model.distinct('environment_id').exec() as Promise<string[]>,
    /** The first connection of an integration whose config or metadata holds `value` at `key` (webhook routing). */
    findByField: (environment: EnvironmentId, providerConfigKey: string, field: 'connection_config' | 'metadata', key: string, value: string | number | boolean) =>
      scoped.findOne(environment, { provider_config_key: providerConfigKey, [`${field}.${key}`]: value }),
    /** Many connections by connection id within one integration (metadata writes). */
    findMany: (environment: EnvironmentId, providerConfigKey: string, connectionIds: string[]) =>
      scoped.find(environment, { provider_config_key: providerConfigKey, connection_id: { $in: connectionIds } }),
  };
}

export type ConnectionRepo = ReturnType<typeof createConnectionRepo>;
