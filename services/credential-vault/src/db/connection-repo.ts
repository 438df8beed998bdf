import type { Connection, QueryFilter } from 'mongoose';
import { AppError } from '@latchkey/errors';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { createConnectionLists, matchesFilter, type ConnectionFilter } from './connection-lists.js';
import { connectionKey, connectionKeyModel, connectionModel, type ConnectionDoc, type ConnectionKeyDoc, type SyncRunState } from './connection-model.js';

export type { ConnectionFilter } from './connection-lists.js';

/** What `update` may write: never the credentials or their version (see `replaceCredentials`). */
export type ConnectionFields = Partial<Omit<ConnectionDoc, '_id' | 'environment_id' | 'credentials' | 'credentials_version'>>;

/** The version a document holds; documents older than the field hold none, which counts as 0. */
export const credentialsVersionOf = (doc: Pick<ConnectionDoc, 'credentials_version'>): number => doc.credentials_version ?? 0;

function atVersion(version: number) {
  return version === 0 ? { $or: [{ credentials_version: 0 }, { credentials_version: { $exists: false } }] } : { credentials_version: version };
}

/** The hot lookups' filters, as the repo sends them (the explain test runs these). */
export const connectionQueries = {
  key: (environment: string, providerConfigKey: string, connectionId: string) => ({ _id: connectionKey(environment, providerConfigKey, connectionId) }),
  byId: (id: string) => ({ _id: id }),
};

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function createConnectionRepo(connection: Connection) {
  const model = connectionModel(connection);
  const keys = connectionKeyModel(connection);
  const scoped = scopedRepo(model);
  const lists = createConnectionLists(connection);
  const keyOf = (doc: Pick<ConnectionDoc, '_id' | 'environment_id' | 'provider_config_key' | 'connection_id'>): ConnectionKeyDoc => ({
    ...connectionQueries.key(doc.environment_id, doc.provider_config_key, doc.connection_id),
    connection: doc._id,
  });
  const writeKey = (entry: ConnectionKeyDoc) => keys.replaceOne({ _id: entry._id }, entry, { upsert: true }).exec();
  /** One `_id` lookup (the environment is checked on the document, not in the filter, which FerretDB would scan). */
  const findById = async (environment: EnvironmentId, id: string): Promise<ConnectionDoc | null> => {
    const doc = await model.findOne(connectionQueries.byId(id)).lean<ConnectionDoc>().exec();
    return doc?.environment_id === environment ? doc : null;
  };
  /** Two `_id` lookups; an entry left by a removed connection finds nothing. */
  const findByKey = async (environment: EnvironmentId, providerConfigKey: string, connectionId: string): Promise<ConnectionDoc | null> => {
    const entry = await keys.findOne(connectionQueries.key(environment, providerConfigKey, connectionId)).lean<ConnectionKeyDoc>().exec();
    if (!entry) return null;
    const doc = await findById(environment, entry.connection);
    return doc && doc.provider_config_key === providerConfigKey && doc.connection_id === connectionId ? doc : null;
  };
  /** A backfill's note on a connection (`flag` set): by `_id` alone, once it is the environment's (see `update`). */
  const marker =
    (flag: 'searchable' | 'listed') =>
    async (environment: EnvironmentId, id: string): Promise<boolean> => {
      if (!(await findById(environment, id))) return false;
      return (await model.updateOne(connectionQueries.byId(id), { $set: { [flag]: true } }).exec()).matchedCount > 0;
    };
  /** Notes that the connection has its search lists. */
  const markSearchable = marker('searchable');
  /** Notes that the connection is in the lists of its fields. */
  const markListed = marker('listed');
  /** A write of fields that may move the connection into lists (`tags`, `end_user`): see `joining`. */
  const listing = async (environment: EnvironmentId, id: string, fields: ConnectionFields, write: () => Promise<boolean>): Promise<boolean> => {
    if (!('tags' in fields) && !('end_user' in fields)) return write();
    const doc = await findById(environment, id);
    if (doc) await lists.joining(doc, fields);
    return write();
  };
  return {
    init: async () => {
      await Promise.all([model.init(), keys.init(), lists.init()]);
    },
    /**
     * Gives every connection its key entry (connections stored before the entries existed, or
     * whose entry a crash left unwritten). Idempotent, and two replicas starting together write
     * the same documents. One read of each collection at start, whole before writing (FerretDB's
     * SQLite backend holds writes back under an open cursor); returns how many entries it wrote.
     */
    async indexKeys(): Promise<number> {
      const docs = await model.find({}, { _id: 1, environment_id: 1, provider_config_key: 1, connection_id: 1 }).lean<ConnectionDoc[]>().exec();
      const entries = await keys.find({}).lean<ConnectionKeyDoc[]>().exec();
      const written = new Map(entries.map((entry) => [entry._id, entry.connection]));
      let added = 0;
      for (const doc of docs) {
        const entry = keyOf(doc);
        if (written.get(entry._id) === doc._id) continue;
        try {
          await writeKey(entry);
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
        }
        added += 1;
      }
      return added;
    },
    /**
     * Lists every connection stored before the lists (or by a replica that did not list yet),
     * oldest first, in the lists of its fields, and marks it listed (its search lists are
     * `indexGrams`'s). Two replicas starting together may both list one connection: a reader
     * skips the second entry. `mark` writes `listed` (the vault runs it under the connection's
     * write key, as `indexGrams`' mark: a connection not yet listed may be refreshed meanwhile by
     * a replica already serving). Returns how many it listed.
     */
    async indexLists(options: { mark?: (environment: EnvironmentId, id: string) => Promise<unknown> } = {}): Promise<number> {
      const mark = options.mark ?? markListed;
      const docs = (await model.find({}, { _id: 1, environment_id: 1, provider_config_key: 1, connection_id: 1, tags: 1, end_user: 1, listed: 1, created_at: 1 }).lean<ConnectionDoc[]>().exec())
        .filter((doc) => doc.listed !== true)
        .sort((a, b) => a.created_at.getTime() - b.created_at.getTime());
      for (const doc of docs) {
        await lists.enterFieldLists(doc);
        await mark(doc.environment_id as EnvironmentId, doc._id);
      }
      return docs.length;
    },
    /**
     * Gives every connection stored before the search lists (without `searchable`) its entries
     * there, oldest first, one connection at a time, marking each; then marks the backfill done,
     * and searches read the gram lists from then on (until then they walk the other lists). Run
     * in the background, since it costs a UUID's 34 appends per connection: stops between two
     * connections once `signal` is aborted, and the next run carries on from the unmarked ones.
     * Two replicas at once may enter one connection twice; a reader skips the second entry.
     * `mark` writes `searchable` (the vault runs it under the connection's write key: FerretDB
     * rewrites the whole document, so an unserialized write could undo a concurrent refresh's).
     * Returns how many connections it entered.
     */
    async indexGrams(options: { signal?: AbortSignal; mark?: (environment: EnvironmentId, id: string) => Promise<unknown> } = {}): Promise<number> {
      const mark = options.mark ?? markSearchable;
      const docs = (await model.find({}, { _id: 1, environment_id: 1, provider_config_key: 1, connection_id: 1, searchable: 1, created_at: 1 }).lean<ConnectionDoc[]>().exec())
        .filter((doc) => doc.searchable !== true)
        .sort((a, b) => a.created_at.getTime() - b.created_at.getTime());
      let entered = 0;
      for (const doc of docs) {
        if (options.signal?.aborted) return entered;
        await lists.enterSearchLists(doc);
        await mark(doc.environment_id as EnvironmentId, doc._id);
        entered += 1;
      }
      await lists.markGramsComplete();
      return entered;
    },
    markSearchable,
    markListed,
    find: findByKey,
    findById,
    /**
     * Its list entries first (an entry without its connection lists nothing), then the connection
     * (its unique index refuses a duplicate), then its key entry. `storing` runs the insert of the
     * connection itself, the moment it exists (the vault's checks its integration still holds its
     * key, under the integration's members key: `IntegrationService.storing`). An insert that
     * fails leaves nothing stored but list entries (which list nothing), even when `storing`
     * fails once the connection is stored (that key lost meanwhile).
     */
    async insert(
      environment: EnvironmentId,
      doc: Omit<ConnectionDoc, 'environment_id'>,
      storing: (store: () => Promise<ConnectionDoc>) => Promise<ConnectionDoc> = (store) => store(),
    ): Promise<ConnectionDoc> {
      await lists.enter({ ...doc, environment_id: environment });
      let inserted: ConnectionDoc | undefined;
      let stored: ConnectionDoc;
      try {
        stored = await storing(async () => (inserted = await scoped.insert(environment, { ...doc, listed: true, searchable: true })));
      } catch (error) {
        if (inserted) await scoped.deleteOne(environment, { _id: doc._id }).catch(() => undefined);
        if (isDuplicateKey(error)) {
          throw new AppError('invalid_body', `Connection "${doc.connection_id}" exists already in integration "${doc.provider_config_key}"`, {
            errors: [{ code: 'duplicate', message: 'connection_id is taken in this integration', path: 'connection_id' }],
          });
        }
        throw error;
      }
      try {
        await writeKey(keyOf(stored));
      } catch (error) {
        await scoped.deleteOne(environment, { _id: doc._id }).catch(() => undefined);
        throw error;
      }
      return stored;
    },
    /**
     * `integrationKeys`: the environment's integrations, for a list by connection id. Then the
     * list is one key lookup per integration (two `_id` lookups each, see `find`) and the other
     * filters are applied to those few documents, instead of a query FerretDB answers by reading
     * every connection of every environment. Without a connection id, the environment's lists
     * are read (connection-lists.ts; a search, its grams' lists): `_id` lookups only, as many as
     * the page needs.
     */
    async list(environment: EnvironmentId, filter: ConnectionFilter, page: { limit: number; page: number }, integrationKeys?: readonly string[]): Promise<ConnectionDoc[]> {
      const connectionId = filter.connection_id;
      if (connectionId !== undefined && (filter.provider_config_keys?.length || integrationKeys)) {
        const keys = [...new Set(filter.provider_config_keys?.length ? filter.provider_config_keys : integrationKeys)];
        const found = (await Promise.all(keys.map((key) => findByKey(environment, key, connectionId)))).filter(
          (doc): doc is ConnectionDoc => doc !== null && matchesFilter(doc, filter),
        );
        found.sort((a, b) => b.created_at.getTime() - a.created_at.getTime());
        return found.slice(page.page * page.limit, (page.page + 1) * page.limit);
      }
      if (connectionId === undefined) return lists.page(environment, filter, page);
      const query: QueryFilter<Omit<ConnectionDoc, 'environment_id'>> = {};
      if (connectionId !== undefined) query.connection_id = connectionId;
      if (filter.provider_config_keys?.length) query.provider_config_key = { $in: filter.provider_config_keys };
      for (const [key, value] of Object.entries(filter.tags ?? {})) Object.assign(query, { [`tags.${key}`]: value });
      if (filter.end_user_id !== undefined) Object.assign(query, { 'end_user.id': filter.end_user_id });
      // Both may be given: an exact id and a search must both match.
      if (filter.search) Object.assign(query, { $and: [{ connection_id: { $regex: escapeRegex(filter.search), $options: 'i' } }] });
      return scoped.find(environment, query, { sort: { created_at: -1 }, limit: page.limit, skip: page.page * page.limit });
    },
    /** A page of an integration's connections by name, from where the last stopped (see the lists' `integrationPage`). */
    integrationPage: (environment: EnvironmentId, providerConfigKey: string, before: number | undefined, limit: number) => lists.integrationPage(environment, providerConfigKey, before, limit),
    countForIntegration: (environment: EnvironmentId, integrationId: string) => scoped.count(environment, { integration_id: integrationId }),
    listForIntegration: (environment: EnvironmentId, integrationId: string) => scoped.find(environment, { integration_id: integrationId }),
    /**
     * Fields other than the credentials; those change only through `replaceCredentials`. Two
     * `_id` lookups: the document's environment is checked on a read (a connection never changes
     * environment), and the write's filter is `_id` alone, which FerretDB answers from an index
     * (with the environment in it, it reads every connection).
     */
    update: async (environment: EnvironmentId, id: string, fields: ConnectionFields): Promise<boolean> => {
      const doc = await findById(environment, id);
      if (!doc) return false;
      await lists.joining(doc, fields);
      return (await model.updateOne(connectionQueries.byId(id), { $set: fields }).exec()).matchedCount > 0;
    },
    /**
     * Stamps the time of a fetch, never moving it back: the stamps of two fetches (two replicas)
     * may land in either order, and the later fetch's time stays (`$max`; a connection never
     * fetched holds null, which any time is above). `_id` lookups, as `update`'s.
     */
    stampFetched: async (environment: EnvironmentId, id: string, at: Date): Promise<boolean> => {
      if (!(await findById(environment, id))) return false;
      return (await model.updateOne(connectionQueries.byId(id), { $max: { last_fetched_at: at } }).exec()).matchedCount > 0;
    },
    /**
     * Writes new credentials (and any other fields) only if the connection still holds
     * `readVersion`, bumping it: a compare-and-set on one document. MongoDB 7 does it atomically;
     * FerretDB reads and writes back the whole document, so the vault runs every write to a
     * connection alone (domain/serialized-writes.ts). False when another writer got there first;
     * its credentials stay. With `unchangedSince`, also only if `updated_at` is still that: a
     * writer whose fields derive from others it read (a reconnect's tags) loses to any write
     * since, a tags PATCH included, which leaves the credentials version alone.
     */
    replaceCredentials: (
      environment: EnvironmentId,
      id: string,
      readVersion: number,
      fields: ConnectionFields & Pick<ConnectionDoc, 'credentials'>,
      unchangedSince?: Date,
    ) =>
      listing(environment, id, fields, () =>
        scoped.updateOne(
          environment,
          { _id: id, ...atVersion(readVersion), ...(unchangedSince === undefined ? {} : { updated_at: unchangedSince }) },
          { $set: { ...fields, credentials_version: readVersion + 1 } },
        ),
      ),
    /** Fields written only while the connection still holds `readVersion` (a refresh failure must not mark newer tokens). */
    updateAtVersion: (environment: EnvironmentId, id: string, readVersion: number, fields: ConnectionFields) =>
      listing(environment, id, fields, () => scoped.updateOne(environment, { _id: id, ...atVersion(readVersion) }, { $set: fields })),
    /**
     * The connection, then its key entry (an entry left behind finds nothing: see `find`). Both by
     * `_id` alone, once the read has shown the connection is the environment's.
     */
    async remove(environment: EnvironmentId, id: string): Promise<boolean> {
      const doc = await findById(environment, id);
      if (!doc) return false;
      const removed = (await model.deleteOne(connectionQueries.byId(id)).exec()).deletedCount > 0;
      await keys.deleteOne({ _id: keyOf(doc)._id }).exec();
      return removed;
    },
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
