import type { Connection, QueryFilter, mongo } from 'mongoose';
import { findByIds, idListsIndexed, isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import type { RecordAction } from '@latchkey/contracts';
import {
  GAP_LIST_BLOCKS,
  LOG_BLOCK,
  decodeLogEntry,
  encodeLogEntry,
  logBlockKey,
  logGapsKey,
  recordKey,
  recordLogGapsModel,
  recordLogModel,
  recordModel,
  recordSequenceModel,
  type RecordDoc,
  type RecordLogBlockDoc,
  type RecordLogEntry,
  type RecordLogGapsDoc,
  type RecordSequenceDoc,
} from './record-model.js';

/** The records of one connection's model in one variant. */
export interface RecordScope {
  environment: EnvironmentId;
  connection: number;
  model: string;
  variant: string;
}

export type RecordWrite = Omit<RecordDoc, '_id' | 'environment_id' | 'connection' | 'model' | 'variant'>;

export interface PageQuery {
  afterSeq?: number;
  modifiedAfter?: Date;
  actions?: readonly RecordAction[];
  ids?: readonly string[];
  limit: number;
  /**
   * The page ends once its records' payloads reach this many bytes (after one record at
   * least), whatever `limit` says: records may be large, and a page is held, then sent, whole.
   */
  maxBytes?: number;
}

/** A page's records' payloads, in UTF-16 code units: what its budget counts. */
const payloadSize = (doc: RecordDoc) => doc.payload?.length ?? 0;

/**
 * Whether records may follow a page read with `limit` one past the page's `size`, as the records
 * handler reads them: the read found that one more, or stopped at the byte budget.
 */
export function pageContinues(docs: readonly RecordDoc[], size: number, maxBytes = Infinity): boolean {
  if (docs.length > size) return true;
  let bytes = 0;
  for (const doc of docs) bytes += payloadSize(doc);
  return docs.length > 0 && bytes >= maxBytes;
}

/** Lookups a re-sync makes at once; the driver's pool (100 by default) keeps room for others. */
const LOOKUPS_IN_FLIGHT = 50;
/** Change log blocks a page reads at once. */
const BLOCKS_IN_FLIGHT = 4;
/**
 * Change log documents a write reads at most to move its scope's `start` on. Blocks emptied by
 * this code are passed by their gap lists, so this bounds only the catching up on blocks the
 * code before emptied and left stored: such a scope's start moves past them over a few writes.
 */
const START_READS = 64;
/** The change log's shape; a scope's head without it is back-filled at start. */
const LOG_VERSION = 1;
const ACTIONS: readonly RecordAction[] = ['ADDED', 'UPDATED', 'DELETED'];
/** The actions whose blocks the head lists. */
const LISTED: readonly RecordAction[] = ['UPDATED', 'DELETED'];
/** Records a page looks up at once: FerretDB on PostgreSQL holds a database connection for each. */
const PAGE_LOOKUPS_IN_FLIGHT = 16;
/** A record's fields but its payload: what a page by id reads of every record named, and a save of every record it is given. */
export const WITHOUT_PAYLOAD = { payload: 0 };

/** What a scope's head starts with, besides its counter: a change log, and a count of nothing. */
const NEW_HEAD = { log: LOG_VERSION, live: 0, live_visible: 0, live_from: 0 };
/** What a change made readable does to the count of records not deleted. */
const LIVE_CHANGE: Record<RecordAction, number> = { ADDED: 1, UPDATED: 0, DELETED: -1 };
/**
 * Whether a head's count is kept up to what readers read: counted up to its `visible` number,
 * since its last clear. A head from before counts were kept, or written by a replica that kept
 * none (a rolling upgrade), is counted from its records once more (`settleCount`).
 */
const countKept = (head: RecordSequenceDoc): head is RecordSequenceDoc & { live: number } =>
  head.live !== undefined && head.live_visible === (head.visible ?? 0) && (head.live_from ?? 0) === (head.from ?? 0);

/** A change as `publish` counts it: its number and action. */
export interface CountedChange {
  seq: number;
  action: RecordAction;
}

/** What a write publishes, besides the number readers may read up to. */
interface Published {
  /** Its own changes, stored. */
  own?: readonly CountedChange[];
  /** The changes before of the records it wrote again (their entries leave the log). */
  superseded?: readonly CountedChange[];
  /** Its entries for records it did not write, found stored (they leave the log). */
  unused?: readonly number[];
  /**
   * The unused numbers go back in the log next, for the same records (`insertNew` writes them
   * as upserts): a block they leave empty is not buried, as it will hold entries again.
   */
  unusedAgain?: boolean;
  /** Records found stored by another writer meanwhile, whose change before is not known: the count is dropped. */
  uncounted?: boolean;
}

const blockOf = (seq: number) => Math.floor(seq / LOG_BLOCK);
const groupOf = (block: number) => Math.floor(block / GAP_LIST_BLOCKS);
const entryField = (seq: number) => `e.s${seq}`;

/**
 * The filters of every hot query, shared with the explain test so it checks the very queries
 * the repository sends: each is an `_id` equality, answered from an index on MongoDB and on
 * FerretDB's SQLite and PostgreSQL backends alike (FerretDB 1.24 pushes down no other filter
 * on SQLite, and no range, sort or limit on either backend).
 */
export const recordQueries = {
  /** A record, by its scope and own id. */
  byId: (scope: RecordScope, externalId: string) => ({ _id: recordKey(scope.environment, scope.connection, scope.model, scope.variant, externalId) }),
  /** A scope's sequence counter and the head of its change log. */
  sequence: (scope: RecordScope) => ({ _id: JSON.stringify([scope.environment, scope.connection, scope.model, scope.variant]) }),
  /** One block of a scope's change log. */
  logBlock: (scope: RecordScope, block: number) => ({ _id: logBlockKey(scope.environment, scope.connection, scope.model, scope.variant, block) }),
  /** The list of one group's emptied blocks. */
  logGaps: (scope: RecordScope, group: number) => ({ _id: logGapsKey(scope.environment, scope.connection, scope.model, scope.variant, group) }),
};

type Entry = [seq: number, entry: RecordLogEntry];

/** What one read knows of a scope's emptied blocks (`gapReader`). */
interface GapReader {
  /** Whether a gap list read names the block. */
  has(block: number): boolean;
  /** Reads the gap lists that say which blocks after the missing `block`, up to `last`, hold nothing; returns how many it read. */
  learn(block: number, last: number): Promise<number>;
}

/** Block numbers of the lists, once each, in order. */
function sortedUnion(lists: ReadonlyArray<readonly number[] | undefined>): number[] {
  return [...new Set(lists.flatMap((list) => list ?? []))].sort((a, b) => a - b);
}

/**
 * The blocks that may hold entries of these actions from block `low` to `high`: every block
 * when added records are asked for, else those the head lists; none below the head's `from`
 * (where the scope was last cleared) or its `start` (below which every block emptied). So a
 * scope whose records were all written again since they were added (an incremental sync over
 * weeks) is read from its first block holding a record, not through the blocks they left.
 */
function blocksFor(top: RecordSequenceDoc, actions: readonly RecordAction[], low: number, high: number): number[] {
  const first = Math.max(low, top.from ?? 0, top.start ?? 0);
  if (actions.includes('ADDED')) return Array.from({ length: Math.max(0, high - first + 1) }, (_, i) => first + i);
  return sortedUnion(actions.map((action) => top.blocks?.[action])).filter((block) => block >= first && block <= high);
}

function groupBy<T>(items: readonly T[], key: (item: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group) group.push(item);
    else groups.set(key(item), [item]);
  }
  return groups;
}

/** Runs `work` for each item, `inFlight` at a time. */
async function inFlights<T>(items: readonly T[], inFlight: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let at = 0; at < items.length; at += inFlight) await Promise.all(items.slice(at, at + inFlight).map(work));
}

export function createRecordRepo(mongo: Connection) {
  const records = recordModel(mongo);
  const sequences = recordSequenceModel(mongo);
  const log = recordLogModel(mongo);
  const gapLists = recordLogGapsModel(mongo);
  const recordDocs = records.collection as unknown as mongo.Collection<RecordDoc>;
  const heads = sequences.collection as unknown as mongo.Collection<RecordSequenceDoc>;
  const blocks = log.collection as unknown as mongo.Collection<RecordLogBlockDoc>;
  const gaps = gapLists.collection as unknown as mongo.Collection<RecordLogGapsDoc>;
  const inScope = (scope: RecordScope): QueryFilter<RecordDoc> => ({
    environment_id: scope.environment,
    connection: scope.connection,
    model: scope.model,
    variant: scope.variant,
  });
  const keyOf = (scope: RecordScope, externalId: string) => recordKey(scope.environment, scope.connection, scope.model, scope.variant, externalId);

  const listsIndexed = () => idListsIndexed(mongo);
  /**
   * Single-document writes, each by `_id`: on MongoDB many at once; on FerretDB one at a time.
   * FerretDB 1.24 on SQLite takes one writer at a time and makes the others wait in SQLite's
   * busy handler, so concurrent writes cost several times more each than the same writes in
   * turn; and one update command of a hundred statements or more takes minutes there, if it
   * ends at all, where the same updates sent one by one take milliseconds.
   */
  const eachWrite = async <T,>(items: readonly T[], work: (item: T) => Promise<unknown>) =>
    inFlights(items, (await listsIndexed()) ? LOOKUPS_IN_FLIGHT : 1, work);

  /**
   * A write's first step: its changes go into the log above the scope's `visible` number, so
   * no reader takes them yet, and their blocks into the head's lists. Written before the
   * records, so a record stored is always in the log, even if the writer stops half-way.
   */
  async function announce(scope: RecordScope, writes: readonly Pick<RecordWrite, 'seq' | 'external_id' | 'last_action' | 'last_modified_at'>[]): Promise<void> {
    if (writes.length === 0) return;
    // Only the rarer actions have lists: pages of every action, or of added records, read all
    // the blocks from the cursor on (but those emptied since, see `bury`).
    const lists: Record<string, { $each: number[] }> = {};
    for (const action of LISTED) {
      const numbers = [...new Set(writes.filter((write) => write.last_action === action).map((write) => blockOf(write.seq)))];
      if (numbers.length > 0) lists[`blocks.${action}`] = { $each: numbers };
    }
    if (Object.keys(lists).length > 0) {
      await heads.updateOne(recordQueries.sequence(scope), { $addToSet: lists, $setOnInsert: { seq: 0, ...NEW_HEAD } } as mongo.UpdateFilter<RecordSequenceDoc>, { upsert: true });
    }
    await eachWrite([...groupBy(writes, (write) => blockOf(write.seq))], ([block, group]) =>
      blocks.updateOne(
        recordQueries.logBlock(scope, block),
        {
          $set: Object.fromEntries(group.map((write) => [entryField(write.seq), encodeLogEntry({ r: keyOf(scope, write.external_id), a: write.last_action, t: write.last_modified_at })])),
          $max: { t1: new Date(Math.max(...group.map((write) => write.last_modified_at.getTime()))) },
          $setOnInsert: { environment_id: scope.environment, connection: scope.connection, model: scope.model, variant: scope.variant },
        } as mongo.UpdateFilter<RecordLogBlockDoc>,
        { upsert: true },
      ),
    );
  }

  /**
   * A write's last step: readers may now read up to `upTo`, and the scope's count follows; then
   * entries no longer current leave the log (superseded and unused ones). A superseded entry
   * left behind (the writer stopped before this) is read past: its record is newer.
   */
  async function publish(scope: RecordScope, upTo: number, published: Published): Promise<void> {
    const top = await head(scope);
    const from = top?.visible ?? 0;
    let counted: { live: number; live_visible: number } | { live_visible: number } | undefined;
    if (top && upTo > from && countKept(top)) {
      counted = published.uncounted ? { live_visible: -1 } : { live: top.live + (await liveChange(scope, from, upTo, published)), live_visible: upTo };
    }
    await heads.updateOne(
      recordQueries.sequence(scope),
      { $max: { visible: upTo }, ...(counted ? { $set: counted } : {}), $setOnInsert: { seq: 0, ...(counted ? { log: LOG_VERSION } : NEW_HEAD) } } as mongo.UpdateFilter<RecordSequenceDoc>,
      { upsert: true },
    );
    const gone = [...(published.superseded ?? []).map((change) => change.seq), ...(published.unused ?? [])];
    if (gone.length === 0) return;
    // Blocks left with no entry, whose numbers were all handed out (`top` was read after this
    // write reserved its own): none will ever get an entry again, as writes to a scope run one
    // at a time and each logs its numbers before it stores or publishes anything; but for the
    // numbers `insertNew` logs again, whose blocks stay.
    const open = blockOf((top?.seq ?? 0) + 1);
    const again = new Set(published.unusedAgain ? (published.unused ?? []).map(blockOf) : []);
    const emptied: number[] = [];
    await eachWrite([...groupBy(gone, blockOf)], async ([block, seqs]) => {
      const left = await blocks.findOneAndUpdate(
        recordQueries.logBlock(scope, block),
        { $unset: Object.fromEntries(seqs.map((seq) => [entryField(seq), ''])) },
        { returnDocument: 'after' },
      );
      if (left && Object.keys(left.e).length === 0 && block < open && !again.has(block)) emptied.push(block);
    });
    if (top && emptied.length > 0) await bury(scope, top, emptied);
  }

  /**
   * Takes blocks a write emptied out of the way of readers: each is named in its gap list, leaves
   * the head's lists and is deleted, and the head's `start` moves past the blocks before the
   * first that holds entries. Each step alone leaves the log correct (the blocks hold nothing),
   * so a writer stopping half-way only leaves a page a few lookups dearer.
   */
  async function bury(scope: RecordScope, top: RecordSequenceDoc, emptied: readonly number[]): Promise<void> {
    await eachWrite([...groupBy(emptied, groupOf)], ([group, numbers]) =>
      gaps.updateOne(
        recordQueries.logGaps(scope, group),
        {
          $addToSet: { b: { $each: numbers } },
          $setOnInsert: { environment_id: scope.environment, connection: scope.connection, model: scope.model, variant: scope.variant },
        } as mongo.UpdateFilter<RecordLogGapsDoc>,
        { upsert: true },
      ),
    );
    const start = await firstHolding(scope, top, new Set(emptied));
    await heads.updateOne(recordQueries.sequence(scope), {
      $pullAll: Object.fromEntries(LISTED.map((action) => [`blocks.${action}`, emptied])),
      $max: { start },
    } as mongo.UpdateFilter<RecordSequenceDoc>);
    await eachWrite(emptied, (block) => blocks.deleteOne(recordQueries.logBlock(scope, block)));
  }

  /**
   * The first block, from the head's `start` on, that may hold entries: the blocks `emptied` by
   * this write and those named in gap lists are passed without a lookup; a block missing or
   * stored with no entry, all its numbers handed out, holds nothing either (the code before gap
   * lists left emptied blocks stored). Reads `START_READS` documents at most; a later write that
   * empties a block goes on from there.
   */
  async function firstHolding(scope: RecordScope, top: RecordSequenceDoc, emptied: ReadonlySet<number>): Promise<number> {
    const open = blockOf(top.seq + 1);
    const buried = gapReader(scope);
    let block = Math.max(top.from ?? 0, top.start ?? 0);
    for (let reads = 0; block < open && reads < START_READS; block++) {
      if (emptied.has(block) || buried.has(block)) continue;
      const doc = await blocks.findOne(recordQueries.logBlock(scope, block));
      reads++;
      if (doc && Object.keys(doc.e).length > 0) break;
      if (!doc) reads += await buried.learn(block, open - 1);
    }
    return block;
  }

  /**
   * What one read learns of a scope's emptied blocks from their gap lists. On meeting a missing
   * block it reads the block's group's list, then the next group's while every block after it up
   * to `last` is named, and so on; the read then passes over every block named.
   */
  function gapReader(scope: RecordScope): GapReader {
    const named = new Set<number>();
    const read = new Set<number>();
    return {
      has: (block) => named.has(block),
      async learn(block, last) {
        let reads = 0;
        for (let group = groupOf(block); group <= groupOf(last); group++) {
          if (!read.has(group)) {
            read.add(group);
            reads++;
            const list = await gaps.findOne(recordQueries.logGaps(scope, group));
            for (const number of list?.b ?? []) named.add(number);
          }
          const end = Math.min((group + 1) * GAP_LIST_BLOCKS, last + 1);
          for (let next = Math.max(block + 1, group * GAP_LIST_BLOCKS); next < end; next++) if (!named.has(next)) return reads;
        }
        return reads;
      },
    };
  }

  /**
   * What the count of records not deleted gains as `visible` goes from `from` to `upTo`: the
   * write's own changes; the changes before of records it wrote again, when they were never
   * readable (a stopped writer's, above `from`: the write's own change follows on from them);
   * and what else lies in between, the entries of stopped writers, each counted only if its
   * record was stored (one whose writer stopped before storing it names a record that never
   * changed). Without a writer stopping, nothing else lies in between, and nothing is read.
   */
  async function liveChange(scope: RecordScope, from: number, upTo: number, published: Published): Promise<number> {
    const own = published.own ?? [];
    const unread = (published.superseded ?? []).filter((change) => change.seq > from);
    let change = 0;
    for (const counted of [...own, ...unread]) change += LIVE_CHANGE[counted.action];
    const known = new Set([...own, ...unread].map((counted) => counted.seq).concat(published.unused ?? []));
    let inRange = 0;
    for (const seq of known) if (seq > from && seq <= upTo) inRange++;
    if (inRange === upTo - from) return change;
    const numbers = Array.from({ length: blockOf(upTo) - blockOf(from + 1) + 1 }, (_, i) => blockOf(from + 1) + i);
    for (let at = 0; at < numbers.length; at += BLOCKS_IN_FLIGHT) {
      const entries = entriesOf(await readBlocks(scope, numbers.slice(at, at + BLOCKS_IN_FLIGHT)), (seq) => seq > from && seq <= upTo && !known.has(seq));
      const stored = await current(entries);
      entries.forEach(([, entry], i) => {
        if (stored[i]) change += LIVE_CHANGE[entry.a];
      });
    }
    return change;
  }

  /**
   * Writes, then publishes. `superseded`: the records' changes before, by number and action (their
   * log entries go); null when they are not known (records another writer stored meanwhile).
   */
  async function upsertMany(scope: RecordScope, writes: readonly RecordWrite[], superseded: readonly CountedChange[] | null = []): Promise<void> {
    if (writes.length === 0) return;
    await announce(scope, writes);
    // In any order: readers take none of them before `publish`.
    await eachWrite(writes, (write) =>
      recordDocs.updateOne(recordQueries.byId(scope, write.external_id), { $set: { ...inScope(scope), ...write } } as mongo.UpdateFilter<RecordDoc>, { upsert: true }),
    );
    await publish(scope, Math.max(...writes.map((write) => write.seq)), {
      own: writes.map((write) => ({ seq: write.seq, action: write.last_action })),
      ...(superseded === null ? { uncounted: true } : { superseded }),
    });
  }

  /**
   * Inserts every write whose record is not stored yet, in one insert (far cheaper than an
   * upsert each; the documents are complete, so they go to the driver as they are); returns the
   * positions of the writes whose record was stored already: those were not inserted, and their
   * numbers leave the log. The insert is unordered, and what went in is read from the errors,
   * which name each write left out by its position. An ordered insert's count says how many went
   * in, not which: FerretDB 1.24 inserts in batches of 100 and goes on past a duplicate into its
   * next batch, so "the first n" were not the ones stored (a sync run redelivered after its first
   * page had its second page stored, its log entries dropped, and never read). `again`: the
   * caller writes those records next under the numbers they were given (`insertNew`).
   */
  async function insertAbsent(scope: RecordScope, writes: readonly RecordWrite[], again = false): Promise<number[]> {
    if (writes.length === 0) return [];
    await announce(scope, writes);
    let skipped: number[] = [];
    try {
      const documents = writes.map(
        (write): RecordDoc => ({
          _id: keyOf(scope, write.external_id),
          environment_id: scope.environment,
          connection: scope.connection,
          model: scope.model,
          variant: scope.variant,
          ...write,
        }),
      );
      await recordDocs.insertMany(documents, { ordered: false });
    } catch (error) {
      const writeErrors = (error as { writeErrors?: Array<{ index: number; code?: number; errmsg?: string }> }).writeErrors;
      const onlyDuplicates = Array.isArray(writeErrors) && writeErrors.length > 0 && writeErrors.every((item) => isDuplicateKey({ code: item.code, message: item.errmsg }));
      if (!onlyDuplicates) throw error;
      skipped = [...new Set(writeErrors.map((item) => item.index))].sort((a, b) => a - b);
      // Every write inserted or named: else which are stored is not known, and the batch fails.
      const inserted = (error as { insertedCount?: number }).insertedCount;
      if (inserted !== undefined && inserted + skipped.length !== writes.length) {
        throw new Error(`records insert: ${inserted} inserted and ${skipped.length} duplicates of ${writes.length} writes`, { cause: error });
      }
    }
    const left = new Set(skipped);
    const stored = writes.filter((_, index) => !left.has(index));
    await publish(scope, Math.max(0, ...stored.map((write) => write.seq)), {
      own: stored.map((write) => ({ seq: write.seq, action: write.last_action })),
      unused: skipped.map((index) => writes[index]!.seq),
      ...(again ? { unusedAgain: true } : {}),
    });
    return skipped;
  }

  const head = (scope: RecordScope) => heads.findOne(recordQueries.sequence(scope));
  /** A scope's records not deleted up to `visible`, counted from the records themselves (the scope's fields: a scan on FerretDB). */
  const countReadable = (scope: RecordScope, visible: number) => records.countDocuments({ ...inScope(scope), deleted_at: null, seq: { $lte: visible } }).exec();
  const readBlocks = (scope: RecordScope, numbers: readonly number[]) => Promise.all(numbers.map((block) => blocks.findOne(recordQueries.logBlock(scope, block))));
  /** The entries of some blocks that `keep` accepts, in order. */
  const entriesOf = (docs: ReadonlyArray<RecordLogBlockDoc | null>, keep: (seq: number, entry: RecordLogEntry) => boolean): Entry[] =>
    docs
      .flatMap((doc) => (doc ? Object.entries(doc.e).map(([key, entry]): Entry => [Number(key.slice(1)), decodeLogEntry(entry)]) : []))
      .filter(([seq, entry]) => keep(seq, entry))
      .sort((a, b) => a[0] - b[0]);
  /**
   * The records the entries name, still as the entries wrote them (else null: written again
   * since): one `$in` query on MongoDB, one `_id` lookup each (in parallel) on FerretDB.
   */
  const current = async (entries: readonly Entry[]) => {
    const docs = await findByIds(mongo, recordDocs, entries.map(([, entry]) => entry.r));
    const byKey = new Map(docs.flatMap((doc) => (doc ? [[doc._id, doc] as const] : [])));
    return entries.map(([seq, entry]) => {
      const doc = byKey.get(entry.r);
      return doc && doc.seq === seq ? doc : null;
    });
  };

  /**
   * Goes through the log's entries from `after` (exclusive) to `upTo` in the blocks listed,
   * handing each current record to `visit` in order until it returns false. A missing block may
   * be one of a run that emptied: the gap lists name the blocks on to pass over.
   *
   * Blocks the code before gap lists emptied are still stored, with no entry, and named in no
   * list: a read passes them at a lookup each, as it did then, until a write that empties a block
   * moves the scope's `start` past those before its first record (`firstHolding`).
   */
  async function walk(
    scope: RecordScope,
    numbers: readonly number[],
    keep: (seq: number, entry: RecordLogEntry) => boolean,
    wanted: () => number,
    visit: (doc: RecordDoc | null, seq: number) => boolean,
    buried = gapReader(scope),
  ): Promise<void> {
    for (let at = 0; at < numbers.length; ) {
      const batch: number[] = [];
      for (; at < numbers.length && batch.length < BLOCKS_IN_FLIGHT; at++) if (!buried.has(numbers[at]!)) batch.push(numbers[at]!);
      const read = await readBlocks(scope, batch);
      const entries = entriesOf(read, keep);
      for (let next = 0; next < entries.length; ) {
        const chunk = entries.slice(next, next + Math.min(PAGE_LOOKUPS_IN_FLIGHT, Math.max(wanted(), 1)));
        next += chunk.length;
        const docs = await current(chunk);
        for (let i = 0; i < chunk.length; i++) if (!visit(docs[i]!, chunk[i]![0])) return;
      }
      const missing = batch.filter((_, i) => !read[i]);
      if (missing.length > 0) await buried.learn(missing.at(-1)!, numbers.at(-1)!);
    }
  }

  /** The index in `numbers` of the first block with a change after `time` (changes are written in time order). */
  async function firstBlockAfter(scope: RecordScope, numbers: readonly number[], time: Date, buried: GapReader): Promise<number> {
    let low = 0;
    let high = numbers.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      // A block with no document holds nothing: judge by the next one that exists, passing over
      // those the gap lists name.
      let at = middle;
      let doc: RecordLogBlockDoc | null = null;
      for (; at < high; at++) {
        if (buried.has(numbers[at]!)) continue;
        if ((doc = await blocks.findOne(recordQueries.logBlock(scope, numbers[at]!)))) break;
        await buried.learn(numbers[at]!, numbers[high - 1]!);
      }
      if (!doc || doc.t1 > time) high = middle;
      else low = at + 1;
    }
    return low;
  }

  /**
   * Scopes stored before the change log: their heads lack `log`. One pass over the records
   * puts each record's current change in its scope's log; safe to run twice or side by side
   * (entries are set, lists added to, numbers only raised).
   */
  async function backfillLog(): Promise<void> {
    const old = await heads.find({ log: { $exists: false } }).toArray();
    if (old.length === 0) return;
    const pending = new Set(old.map((doc) => doc._id));
    const batches = new Map<string, { scope: RecordScope; docs: RecordDoc[] }>();
    const flush = async (key: string) => {
      const batch = batches.get(key);
      if (!batch) return;
      batches.delete(key);
      await announce(batch.scope, batch.docs);
    };
    for await (const doc of recordDocs.find({})) {
      const scope: RecordScope = { environment: doc.environment_id as EnvironmentId, connection: doc.connection, model: doc.model, variant: doc.variant };
      const key = recordQueries.sequence(scope)._id;
      if (!pending.has(key)) continue;
      const batch = batches.get(key) ?? { scope, docs: [] };
      batches.set(key, batch);
      batch.docs.push(doc);
      if (batch.docs.length >= 2000) await flush(key);
    }
    for (const key of [...batches.keys()]) await flush(key);
    for (const doc of old) await heads.updateOne({ _id: doc._id }, { $max: { visible: doc.seq }, $set: { log: LOG_VERSION } });
  }

  return {
    init: async () => {
      await records.init();
      await sequences.init();
      await log.init();
      await gapLists.init();
      await backfillLog();
    },
    /**
     * By scope and record id, one `{_id}` lookup each (the key is built from both): the one
     * filter every backend answers from an index, MongoDB from `_id`'s, FerretDB in SQL on the
     * index our launcher adds; so a re-sync's lookup costs the same whatever the scope holds. A
     * list (`$in`) or the scope's fields would make FerretDB read the whole collection.
     */
    async findByIds(scope: RecordScope, ids: readonly string[], projection?: mongo.Document): Promise<RecordDoc[]> {
      const found: RecordDoc[] = [];
      const options = projection === undefined ? {} : { projection };
      for (let at = 0; at < ids.length; at += LOOKUPS_IN_FLIGHT) {
        const docs = await Promise.all(ids.slice(at, at + LOOKUPS_IN_FLIGHT).map((id) => recordDocs.findOne(recordQueries.byId(scope, id), options)));
        for (const doc of docs) if (doc) found.push(doc);
      }
      return found;
    },
    /** Reserves `count` sequence numbers and returns the first; one atomic increment. */
    async reserve(scope: RecordScope, count: number): Promise<number> {
      for (let attempt = 0; ; attempt++) {
        try {
          const doc = await sequences
            .findOneAndUpdate(recordQueries.sequence(scope), { $inc: { seq: count }, $setOnInsert: NEW_HEAD }, { upsert: true, returnDocument: 'after' })
            .lean()
            .exec();
          return doc!.seq - count + 1;
        } catch (error) {
          // Two first writers of a scope both upserted: one lost, and now the document exists.
          if (attempt > 0 || !isDuplicateKey(error)) throw error;
        }
      }
    },
    insertAbsent: (scope: RecordScope, writes: readonly RecordWrite[]) => insertAbsent(scope, writes),
    /**
     * Records not stored yet, in one insert. Should another writer have stored some meanwhile,
     * those are written as upserts, which leave the same result.
     */
    async insertNew(scope: RecordScope, writes: readonly RecordWrite[]): Promise<void> {
      const skipped = await insertAbsent(scope, writes, true);
      if (skipped.length > 0) await upsertMany(scope, skipped.map((index) => writes[index]!), null);
    },
    upsertMany,
    /**
     * Lets readers read up to `upTo`, the highest number among records a write found stored
     * and then left as they were. A writer that stopped after storing its records and before
     * publishing them (killed, or its database gone) left them stored and logged but unread;
     * its retry finds them unchanged and writes nothing, so nothing else would publish them.
     * Safe because a record is stored only after its log entry, and writes to a scope run one
     * at a time: the numbers below `upTo` are written, or will never be.
     */
    reveal: (scope: RecordScope, upTo: number) => publish(scope, upTo, {}),
    /**
     * A page in change order, from the change log: the head, then the blocks after the cursor
     * (after a binary search by time for `modified_after`; only the blocks holding the actions
     * asked for; none below the head's `start`, and none a gap list names), then each entry's
     * record; all `_id` lookups. Blocks that later writes emptied cost nothing before the
     * scope's first record, and a lookup per 500 between two records.
     */
    async page(scope: RecordScope, query: PageQuery): Promise<RecordDoc[]> {
      const after = query.afterSeq ?? 0;
      const actions = query.actions ?? ACTIONS;
      const since = query.modifiedAfter;
      const maxBytes = query.maxBytes ?? Infinity;
      let bytes = 0;
      if (query.ids) {
        // As a page reads: up to `visible` (a write in flight shows none of its records yet), read
        // first: a record written again after it is then past it, and read from a later cursor.
        const visible = (await head(scope))?.visible ?? 0;
        // Which records, in change order, by their fields alone (each named once); then the
        // page's whole, in that order, within the budget. One written again since it was chosen
        // is passed over, and the next chosen takes its place: a page one short would say no
        // more follow, though chosen records were left.
        const listed = await this.findByIds(scope, [...new Set(query.ids)], WITHOUT_PAYLOAD);
        const chosen = listed
          .filter((doc) => doc.seq > after && doc.seq <= visible && (!since || doc.last_modified_at > since) && actions.includes(doc.last_action))
          .sort((a, b) => a.seq - b.seq);
        const found: RecordDoc[] = [];
        for (let at = 0; at < chosen.length && found.length < query.limit && bytes < maxBytes; ) {
          const batch = chosen.slice(at, at + Math.min(PAGE_LOOKUPS_IN_FLIGHT, query.limit - found.length));
          at += batch.length;
          const docs = await findByIds(mongo, recordDocs, batch.map((doc) => doc._id));
          for (let i = 0; i < batch.length && bytes < maxBytes; i++) {
            const doc = docs[i];
            if (doc?.seq !== batch[i]!.seq) continue;
            found.push(doc);
            bytes += payloadSize(doc);
          }
        }
        return found;
      }
      const top = await head(scope);
      if (!top) return [];
      const visible = top.visible ?? 0;
      let numbers = blocksFor(top, actions, blockOf(after + 1), blockOf(visible));
      // What the search by time learns of emptied blocks, the page reads on with.
      const buried = gapReader(scope);
      if (since) numbers = numbers.slice(await firstBlockAfter(scope, numbers, since, buried));
      const found: RecordDoc[] = [];
      await walk(
        scope,
        numbers,
        (seq, entry) => seq > after && seq <= visible && actions.includes(entry.a) && (!since || entry.t > since),
        () => query.limit - found.length,
        (doc) => {
          if (doc) {
            found.push(doc);
            bytes += payloadSize(doc);
          }
          return found.length < query.limit && bytes < maxBytes;
        },
        buried,
      );
      return found;
    },
    /**
     * Drops the payloads of up to `limit` records at or before `untilSeq`; says whether more
     * remain. Starts above the scope's `pruned` mark (every record at or below it is pruned) and
     * raises it, so a prune reads only the records it prunes.
     */
    async prune(scope: RecordScope, untilSeq: number, limit: number, now: Date): Promise<{ count: number; hasMore: boolean }> {
      const top = await head(scope);
      if (!top) return { count: 0, hasMore: false };
      const upTo = Math.min(untilSeq, top.visible ?? 0);
      const after = top.pruned ?? 0;
      const numbers = blocksFor(top, ACTIONS, blockOf(after + 1), blockOf(upTo));
      const ids: string[] = [];
      let hasMore = false;
      let done = upTo;
      await walk(
        scope,
        numbers,
        (seq) => seq > after && seq <= upTo,
        () => limit + 1 - ids.length,
        (doc, seq) => {
          if (!doc || doc.payload === null) return true;
          if (ids.length === limit) {
            hasMore = true;
            done = seq - 1;
            return false;
          }
          ids.push(doc._id);
          return true;
        },
      );
      if (ids.length > 0) {
        await eachWrite(ids, (_id) => recordDocs.updateOne({ _id }, { $set: { payload: null, pruned_at: now } }));
      }
      if (done > after) await heads.updateOne(recordQueries.sequence(scope), { $max: { pruned: done } });
      return { count: ids.length, hasMore };
    },
    /** The scope's records not deleted, as readers read them (the sync status): kept in its head, one `_id` lookup. */
    async count(scope: RecordScope): Promise<number> {
      const top = await head(scope);
      if (!top) return 0;
      // Not kept (see `countKept`): counted from the records, as before counts were kept.
      return countKept(top) ? top.live : countReadable(scope, top.visible ?? 0);
    },
    /** The count kept in the scope's head, or null when none is kept (see `countKept`). */
    async keptCount(scope: RecordScope): Promise<number | null> {
      const top = await head(scope);
      if (!top) return 0;
      return countKept(top) ? top.live : null;
    },
    /**
     * Counts a scope whose count is not kept from its records, and keeps it from then on: run as
     * the scope's only writer (`serializedRecordWrites`), so no write changes what it counts.
     * Stored only if nothing was made readable meanwhile (a replica keeping no count, writing).
     */
    async settleCount(scope: RecordScope): Promise<number> {
      const top = await head(scope);
      if (!top) return 0;
      if (countKept(top)) return top.live;
      const live = await countReadable(scope, top.visible ?? 0);
      await heads.updateOne({ ...recordQueries.sequence(scope), visible: top.visible ?? { $exists: false } } as mongo.Filter<RecordSequenceDoc>, {
        $set: { live, live_visible: top.visible ?? 0, live_from: top.from ?? 0 },
      });
      return live;
    },
    /** A full resync starts from nothing: the scope's records and log go; its sequence keeps counting, so older cursors stay valid. */
    async clear(scope: RecordScope): Promise<number> {
      const top = await head(scope);
      // Nothing left to count, from the block the scope now starts at.
      const from = Math.max(top?.from ?? 0, blockOf((top?.seq ?? 0) + 1));
      await heads.updateOne(recordQueries.sequence(scope), { $set: { blocks: {}, from, live: 0, live_visible: top?.visible ?? 0, live_from: from } });
      await log.deleteMany(inScope(scope)).exec();
      await gapLists.deleteMany(inScope(scope)).exec();
      const { deletedCount } = await records.deleteMany(inScope(scope)).exec();
      return deletedCount;
    },
    /** A deleted connection takes its records with it, and their scopes' heads (their counts). */
    async deleteConnection(environment: EnvironmentId, connection: number): Promise<number> {
      await log.deleteMany({ environment_id: environment, connection }).exec();
      await gapLists.deleteMany({ environment_id: environment, connection }).exec();
      const { deletedCount } = await records.deleteMany({ environment_id: environment, connection }).exec();
      // A head's `_id` is its scope as a JSON array: the connection's heads start alike.
      const prefix = JSON.stringify([environment, connection]).slice(0, -1);
      await heads.deleteMany({ _id: { $regex: `^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')},` } });
      return deletedCount;
    },
  };
}

export type RecordRepo = ReturnType<typeof createRecordRepo>;
