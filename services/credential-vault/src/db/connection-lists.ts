import type { Connection, mongo } from 'mongoose';
import { findByIds, isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import {
  connectionListEntryKey,
  connectionListEntryModel,
  connectionListHeadModel,
  connectionListKey,
  connectionModel,
  type ConnectionDoc,
  type ConnectionList,
  type ConnectionListEntryDoc,
  type ConnectionListHeadDoc,
} from './connection-model.js';
import { needleGrams, searchListsOf } from './connection-grams.js';

export interface ConnectionFilter {
  connection_id?: string;
  provider_config_keys?: string[];
  tags?: Record<string, string>;
  end_user_id?: string;
  search?: string;
}

/** What the lists hold of a connection. */
export type Listed = Pick<ConnectionDoc, '_id' | 'environment_id' | 'provider_config_key' | 'connection_id' | 'tags' | 'end_user'>;

/**
 * What a walk reads of each connection it meets: what the filter and the order need, never the
 * credentials or metadata, so a page deep in a large list holds small documents until its own
 * few are read whole.
 */
type Candidate = Listed & Pick<ConnectionDoc, 'created_at'>;
const CANDIDATE_FIELDS = { environment_id: 1, provider_config_key: 1, connection_id: 1, tags: 1, end_user: 1, created_at: 1 };

/** Entries (and then their connections) a list reads at once: FerretDB on PostgreSQL holds a database connection for each. */
const LOOKUPS_IN_FLIGHT = 16;
/** Lists whose last number a replica remembers; past this many it forgets them (a head read each, no more). */
const TOPS_REMEMBERED = 100_000;

const listId = (list: ConnectionList) => JSON.stringify(list);

/** The filters of every list query, shared with the explain test: each an `_id` equality. */
export const connectionListQueries = {
  head: (environment: string, list: ConnectionList) => ({ _id: connectionListKey(environment, list) }),
  entry: (environment: string, list: ConnectionList, entry: number) => ({ _id: connectionListEntryKey(environment, list, entry) }),
  /** The mark of a finished gram backfill: a head no list has (theirs are JSON arrays). */
  gramsComplete: () => ({ _id: 'grams complete' }),
};

/** The lists a connection belongs to by its fields: all, its integration's, one per tag, its end user's. */
export function fieldListsOf(doc: Pick<Listed, 'provider_config_key' | 'tags' | 'end_user'>): ConnectionList[] {
  const lists: ConnectionList[] = [['all'], ['integration', doc.provider_config_key]];
  for (const [key, value] of Object.entries(doc.tags ?? {})) lists.push(['tag', key, value]);
  const endUser = doc.end_user?.['id'];
  if (typeof endUser === 'string') lists.push(['end_user', endUser]);
  return lists;
}

/** Every list of a connection: by its fields, and by its id (grams, or long ids'), which never changes. */
export function listsOf(doc: Pick<Listed, 'provider_config_key' | 'tags' | 'end_user' | 'connection_id'>): ConnectionList[] {
  return [...fieldListsOf(doc), ...searchListsOf(doc.connection_id)];
}

/** Whether a stored connection passes every filter but the connection id (which has its own path). */
export function matchesFilter(doc: Pick<ConnectionDoc, 'provider_config_key' | 'tags' | 'end_user' | 'connection_id'>, filter: ConnectionFilter): boolean {
  const search = filter.search?.toLowerCase();
  return (
    (!filter.provider_config_keys?.length || filter.provider_config_keys.includes(doc.provider_config_key)) &&
    Object.entries(filter.tags ?? {}).every(([key, value]) => doc.tags?.[key] === value) &&
    (filter.end_user_id === undefined || doc.end_user?.['id'] === filter.end_user_id) &&
    (!search || doc.connection_id.toLowerCase().includes(search))
  );
}

/** Newest first; `sort` is stable, so equal times keep the order they were found in. */
const newestFirst = <T extends Pick<ConnectionDoc, 'created_at'>>(docs: T[]) => docs.sort((a, b) => b.created_at.getTime() - a.created_at.getTime());

/**
 * The environment's connection lists, read and written by `_id` alone: FerretDB 1.24 answers no
 * other filter, range, sort or limit from an index, and it updates a document by reading and
 * rewriting it, so of concurrent updates to one document all but one may be lost (40 concurrent
 * `$set`s or `$inc`s of one document on SQLite kept 2). Only inserts are safe from that (the
 * unique `_id` refuses the second), so a list is entries inserted one per number and never
 * changed; the head is only a hint. A reader walks down from the top and looks each entry's
 * connection up, keeping those that pass the filter now (an entry stays behind when its
 * connection leaves the list or is removed, and lists nothing then). A writer must only make
 * sure no connection lacks an entry: entries go in before the connection or its new tags.
 */
export function createConnectionLists(connection: Connection) {
  const headDocs = connectionListHeadModel(connection).collection as unknown as mongo.Collection<ConnectionListHeadDoc>;
  const entryDocs = connectionListEntryModel(connection).collection as unknown as mongo.Collection<ConnectionListEntryDoc>;
  const connectionDocs = connectionModel(connection).collection as unknown as mongo.Collection<ConnectionDoc>;
  /** The last number this replica took, per list head, and that entry's `t`. */
  const tops = new Map<string, { top: number; t: number }>();

  /**
   * Takes the list's next number by inserting its entry there; a number taken already moves it
   * on (first to past the head). `t` is now, or the previous entry's if later (another
   * replica's clock), so it never goes down along the list. The previous entry is read, unless
   * it is the one this replica last wrote to the list.
   */
  async function append(environment: string, list: ConnectionList, doc: Pick<Listed, '_id' | 'connection_id'>): Promise<void> {
    const head = connectionListQueries.head(environment, list);
    const remembered = tops.get(head._id);
    let number = (remembered?.top ?? (await headDocs.findOne(head))?.top ?? 0) + 1;
    let headRead = remembered === undefined;
    let t: number;
    for (;;) {
      // Entries never change, so the one this replica wrote at `remembered.top` still has its `t`.
      const lastWritten = remembered !== undefined && number === remembered.top + 1;
      const below = lastWritten ? remembered : number > 1 ? await entryDocs.findOne(connectionListQueries.entry(environment, list, number - 1)) : null;
      t = Math.max(Date.now(), below?.t ?? 0);
      try {
        await entryDocs.insertOne({ ...connectionListQueries.entry(environment, list, number), c: doc._id, n: doc.connection_id, t });
        break;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        number = headRead ? number + 1 : Math.max(number, (await headDocs.findOne(head))?.top ?? 0) + 1;
        headRead = true;
      }
    }
    if (tops.size >= TOPS_REMEMBERED) tops.clear();
    tops.set(head._id, { top: number, t });
    try {
      await headDocs.updateOne(head, { $max: { top: number } }, { upsert: true });
    } catch (error) {
      // Two first writers of a list both upserted; the head exists now. A hint either way.
      if (!isDuplicateKey(error)) throw error;
    }
  }

  /** Where a list's next entry most likely goes, and its `t`: as `append` starts. */
  async function nextOf(environment: string, list: ConnectionList): Promise<{ number: number; t: number }> {
    const head = connectionListQueries.head(environment, list);
    const remembered = tops.get(head._id);
    if (remembered) return { number: remembered.top + 1, t: Math.max(Date.now(), remembered.t) };
    // The list's last entry, found as a reader finds it (its loop stepped one past it, leaving a gap).
    const top = await topOf(environment, list);
    const below = top > 0 ? await entryDocs.findOne(connectionListQueries.entry(environment, list, top)) : null;
    return { number: top + 1, t: Math.max(Date.now(), below?.t ?? 0) };
  }

  /**
   * Every list of a connection: once each list's next number is known (remembered, or read),
   * all its entries go in one `insertMany` and then the heads in one `bulkWrite`, rather than
   * two writes per list (a UUID's grams are 34 lists: 89 ms a connection against 198 on SQLite
   * once the tops are remembered); an entry whose number was taken meanwhile goes through
   * `append`, one list at a time. Entries before heads: a head never leads its list.
   */
  async function enter(doc: Listed, lists: readonly ConnectionList[]): Promise<void> {
    const environment = doc.environment_id;
    if (lists.length <= 1) {
      for (const list of lists) await append(environment, list, doc);
      return;
    }
    // One read at a time: FerretDB on SQLite answered 4 at a time slower (165 ms a connection against 136).
    const next: Array<{ number: number; t: number }> = [];
    for (const list of lists) next.push(await nextOf(environment, list));
    const entries = lists.map((list, i) => ({ ...connectionListQueries.entry(environment, list, next[i]!.number), c: doc._id, n: doc.connection_id, t: next[i]!.t }));
    const taken = new Set<number>();
    try {
      await entryDocs.insertMany(entries, { ordered: false });
    } catch (error) {
      type WriteError = { index: number; code?: number; errmsg?: string };
      const failures = (error as { writeErrors?: WriteError[] | WriteError }).writeErrors;
      const failed = Array.isArray(failures) ? failures : failures ? [failures] : [];
      if (failed.length === 0 || failed.some((failure) => !isDuplicateKey({ code: failure.code, message: failure.errmsg }))) throw error;
      for (const failure of failed) taken.add(failure.index);
    }
    const heads: Array<mongo.AnyBulkWriteOperation<ConnectionListHeadDoc>> = [];
    lists.forEach((list, i) => {
      if (taken.has(i)) return;
      const head = connectionListQueries.head(environment, list);
      if (tops.size >= TOPS_REMEMBERED) tops.clear();
      tops.set(head._id, { top: next[i]!.number, t: next[i]!.t });
      heads.push({ updateOne: { filter: head, update: { $max: { top: next[i]!.number } }, upsert: true } });
    });
    if (heads.length > 0) {
      try {
        await headDocs.bulkWrite(heads, { ordered: false });
      } catch (error) {
        // First writers of a list both upserted; the head exists now. A hint either way.
        if (!isDuplicateKey(error)) throw error;
      }
    }
    for (const i of taken) {
      tops.delete(connectionListQueries.head(environment, lists[i]!)._id);
      await append(environment, lists[i]!, doc);
    }
  }

  /** Whether every stored connection has its search lists; once true, it stays (see `indexGrams`). */
  let gramsComplete = false;
  async function searchable(): Promise<boolean> {
    if (!gramsComplete) gramsComplete = (await headDocs.findOne(connectionListQueries.gramsComplete())) !== null;
    return gramsComplete;
  }

  /** The list's last number: the head's, then any taken since (the head may lag, never lead). */
  async function topOf(environment: string, list: ConnectionList): Promise<number> {
    let top = (await headDocs.findOne(connectionListQueries.head(environment, list)))?.top ?? 0;
    while (await entryDocs.findOne(connectionListQueries.entry(environment, list, top + 1))) top += 1;
    return top;
  }

  /**
   * The `wanted` newest connections of one list that pass the filter (fewer if it holds fewer),
   * newest first. Walks down from `top` and stops at an entry listed no later than the oldest
   * of the `wanted` newest found: every entry below it was listed no later, and no connection
   * is listed before it is created, so none below is newer (one as old ties, and ties keep the
   * order they were found in, on this page and the next).
   */
  async function walk(environment: EnvironmentId, list: ConnectionList, top: number, filter: ConnectionFilter, wanted: number): Promise<Candidate[]> {
    const found: Candidate[] = [];
    const seen = new Set<string>();
    const oldestWanted = () => (found.length >= wanted ? newestFirst(found)[wanted - 1]!.created_at.getTime() : -Infinity);
    for (let next = top; next >= 1; ) {
      // As many as the page still needs (a few once it has them, to find where to stop).
      const numbers = Array.from({ length: Math.min(LOOKUPS_IN_FLIGHT, Math.max(wanted - found.length, 2), next) }, (_, i) => next - i);
      next -= numbers.length;
      const entries = await findByIds(
        connection,
        entryDocs,
        numbers.map((number) => connectionListQueries.entry(environment, list, number)._id),
      );
      const floor = oldestWanted();
      const fresh: ConnectionListEntryDoc[] = [];
      let done = false;
      for (const entry of entries) {
        if (!entry) continue;
        if (entry.t <= floor) {
          done = true;
          break;
        }
        if (seen.has(entry.c)) continue;
        seen.add(entry.c);
        fresh.push(entry);
      }
      const docs = (await findByIds(
        connection,
        connectionDocs,
        fresh.map((entry) => entry.c),
        fresh.length,
        CANDIDATE_FIELDS,
      )) as Array<Candidate | null>;
      for (const doc of docs) if (doc && doc.environment_id === environment && matchesFilter(doc, filter)) found.push(doc);
      if (done) break;
    }
    return newestFirst(found).slice(0, wanted);
  }

  return {
    init: async () => {
      await Promise.all([connectionListHeadModel(connection).init(), connectionListEntryModel(connection).init()]);
    },

    /** Every list of a connection about to be stored. */
    enter: (doc: Listed) => enter(doc, listsOf(doc)),
    /** The lists by its fields of a connection stored before the lists. */
    enterFieldLists: (doc: Listed) => enter(doc, fieldListsOf(doc)),
    /** The search lists of a connection stored before them. */
    enterSearchLists: (doc: Listed) => enter(doc, searchListsOf(doc.connection_id)),
    /** Marks every connection as having its search lists: searches read them from now on. */
    async markGramsComplete(): Promise<void> {
      try {
        await headDocs.updateOne(connectionListQueries.gramsComplete(), { $max: { top: 1 } }, { upsert: true });
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      gramsComplete = true;
    },

    /**
     * Before a write of `tags` or `end_user`: the lists the connection joins get its entry (the
     * lists it leaves keep theirs, which list nothing once it is written).
     */
    async joining(doc: Listed, fields: Partial<Pick<Listed, 'tags' | 'end_user'>>): Promise<void> {
      if (!('tags' in fields) && !('end_user' in fields)) return;
      // A connection's id never changes, so neither do its search lists.
      const before = new Set(fieldListsOf(doc).map(listId));
      await enter(
        doc,
        fieldListsOf({ ...doc, ...fields }).filter((list) => !before.has(listId(list))),
      );
    },

    /**
     * The connections of one integration, newest first, from entry `before` down (from its top
     * when undefined) until `limit` are found: the entries a page reads and their connections'
     * names, each once, so that walking a whole integration costs its size. `next` is where the
     * following page starts, null past the first entry. Entries of connections since removed
     * list nothing; one added meanwhile is above the walk (its schedules come with its event).
     */
    async integrationPage(environment: EnvironmentId, providerConfigKey: string, before: number | undefined, limit: number): Promise<{ connections: Array<Pick<ConnectionDoc, 'id' | 'connection_id'>>; next: number | null }> {
      const list: ConnectionList = ['integration', providerConfigKey];
      let next = before === undefined ? await topOf(environment, list) : before - 1;
      const connections: Array<Pick<ConnectionDoc, 'id' | 'connection_id'>> = [];
      while (next >= 1 && connections.length < limit) {
        const numbers = Array.from({ length: Math.min(LOOKUPS_IN_FLIGHT, next) }, (_, i) => next - i);
        next -= numbers.length;
        const entries = await findByIds(
          connection,
          entryDocs,
          numbers.map((number) => connectionListQueries.entry(environment, list, number)._id),
        );
        const ids = entries.flatMap((entry) => (entry ? [entry.c] : []));
        const docs = (await findByIds(connection, connectionDocs, ids, ids.length, { environment_id: 1, provider_config_key: 1, connection_id: 1, id: 1 })) as Array<Pick<
          ConnectionDoc,
          '_id' | 'id' | 'connection_id' | 'environment_id' | 'provider_config_key'
        > | null>;
        for (const doc of docs) {
          if (doc && doc.environment_id === environment && doc.provider_config_key === providerConfigKey) connections.push({ id: doc.id, connection_id: doc.connection_id });
        }
      }
      return { connections, next: next >= 1 ? next + 1 : null };
    },

    /**
     * One page, newest first. The filter's most selective list is read (every integration's
     * for several integrations; else the one of fewest entries among the integration, tags,
     * end user and the search's grams asked for), and what it lists is checked against the
     * whole filter. A gram's list goes with the long ids' list (whose ids have no grams). A
     * search shorter than a gram, or before the backfill has given every connection its grams,
     * has no list of its own: the others' (or all connections') are walked with it. A page costs
     * the lookups of every connection before it, as a skip does.
     */
    async page(environment: EnvironmentId, filter: Omit<ConnectionFilter, 'connection_id'>, page: { limit: number; page: number }): Promise<ConnectionDoc[]> {
      const groups: ConnectionList[][] = [];
      if (filter.provider_config_keys?.length) groups.push([...new Set(filter.provider_config_keys)].map((key): ConnectionList => ['integration', key]));
      for (const [key, value] of Object.entries(filter.tags ?? {})) groups.push([['tag', key, value]]);
      if (filter.end_user_id !== undefined) groups.push([['end_user', filter.end_user_id]]);
      const grams = needleGrams(filter.search ?? '');
      if (grams.length > 0 && (await searchable())) for (const gram of grams) groups.push([['gram', gram], ['long_id']]);
      if (groups.length === 0) groups.push([['all']]);
      // Each list's top once (the long ids' list is in every gram's group).
      const asked = new Map<string, Promise<number>>();
      const topOnce = (list: ConnectionList) => asked.get(listId(list)) ?? asked.set(listId(list), topOf(environment, list)).get(listId(list))!;
      const sized = await Promise.all(groups.map((group) => Promise.all(group.map(async (list) => ({ list, top: await topOnce(list) })))));
      const total = (group: Array<{ top: number }>) => group.reduce((sum, source) => sum + source.top, 0);
      const sources = sized.reduce((best, group) => (total(group) < total(best) ? group : best));
      const wanted = (page.page + 1) * page.limit;
      const found: Candidate[] = [];
      for (const source of sources) if (source.top > 0) found.push(...(await walk(environment, source.list, source.top, filter, wanted)));
      // Only the page's own connections are read whole (one changed since still has to match).
      const ids = newestFirst(found)
        .slice(page.page * page.limit, wanted)
        .map((doc) => doc._id);
      const docs = await findByIds(connection, connectionDocs, ids, LOOKUPS_IN_FLIGHT);
      return docs.filter((doc): doc is ConnectionDoc => doc !== null && doc.environment_id === environment && matchesFilter(doc, filter));
    },
  };
}

export type ConnectionLists = ReturnType<typeof createConnectionLists>;
