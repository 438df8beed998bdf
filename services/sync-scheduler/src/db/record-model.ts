import { createHash } from 'node:crypto';
import { Schema, type Connection } from 'mongoose';
import type { RecordAction } from '@latchkey/contracts';

/**
 * One synced record of one connection, model and variant. The record itself is kept as JSON
 * text: providers' field names may hold `.` or start with `$`, which a document cannot, and
 * the text is what the content hash covers.
 */
export interface RecordDoc {
  /** `recordKey` of the fields below: writes address a record by `_id`, which every backend indexes best. */
  _id: string;
  environment_id: string;
  /** The connection's public integer id. */
  connection: number;
  model: string;
  variant: string;
  /** The record's own `id`, as a string. */
  external_id: string;
  /** The record as JSON; null once pruned. */
  payload: string | null;
  hash: string;
  first_seen_at: Date;
  last_modified_at: Date;
  last_action: RecordAction;
  deleted_at: Date | null;
  pruned_at: Date | null;
  /** Order of changes within (connection, model, variant): every write takes a new, higher one. */
  seq: number;
}

const recordSchema = new Schema<RecordDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: Number, required: true },
    model: { type: String, required: true },
    variant: { type: String, required: true },
    external_id: { type: String, required: true },
    payload: { type: String, default: null },
    hash: { type: String, required: true },
    first_seen_at: { type: Date, required: true },
    last_modified_at: { type: Date, required: true },
    last_action: { type: String, required: true },
    deleted_at: { type: Date, default: null },
    pruned_at: { type: Date, default: null },
    seq: { type: Number, required: true },
  },
  { versionKey: false },
);
recordSchema.index({ environment_id: 1, connection: 1, model: 1, variant: 1, external_id: 1 }, { unique: true });
recordSchema.index({ environment_id: 1, connection: 1, model: 1, variant: 1, seq: 1 });

/**
 * Per (environment, connection, model, variant): the last sequence number handed out, and the
 * head of the scope's change log (see `RecordLogBlockDoc`).
 */
export interface RecordSequenceDoc {
  _id: string;
  seq: number;
  /** Every change at or below this number is in the log and its record stored: readers stop here. */
  visible?: number;
  /** The log blocks holding updates and deletions (a block leaves them once it has emptied; `clear` empties them). */
  blocks?: Partial<Record<RecordAction, number[]>>;
  /** The first log block that may hold entries: the scope was cleared below it. */
  from?: number;
  /**
   * The first log block, at or above `from`, that may hold entries once every block below it
   * has emptied (each of its records written again since): pages start at the higher of the two.
   * Kept apart from `from`, which the count is checked against (`live_from`), and which a
   * replica without it reads as before.
   */
  start?: number;
  /** Every record at or below this number has had its payload pruned: prune starts above it. */
  pruned?: number;
  /** Set once the scope has a change log; a scope without it is back-filled at start. */
  log?: number;
  /**
   * The scope's records not deleted, among those readers may read: `count` reads it, by `_id`.
   * Kept by each write as it raises `visible`, from the change log's entries it makes readable.
   */
  live?: number;
  /** The `visible` number `live` counts up to: a head where the two differ has no count kept. */
  live_visible?: number;
  /** The `from` block `live` counts from (a clear raises `from`): where the two differ, no count is kept. */
  live_from?: number;
}
const recordSequenceSchema = new Schema<RecordSequenceDoc>(
  {
    _id: { type: String, required: true },
    seq: { type: Number, required: true },
    visible: { type: Number },
    blocks: { type: Schema.Types.Mixed },
    from: { type: Number },
    start: { type: Number },
    pruned: { type: Number },
    log: { type: Number },
    live: { type: Number },
    live_visible: { type: Number },
    live_from: { type: Number },
  },
  { versionKey: false },
);

/** Sequence numbers per block of a change log. */
export const LOG_BLOCK = 500;

/** One change in the log: the record it wrote (its `_id`), the action and its time. */
export interface RecordLogEntry {
  r: string;
  a: RecordAction;
  t: Date;
}

const ACTION_LETTERS: Record<RecordAction, string> = { ADDED: 'A', UPDATED: 'U', DELETED: 'D' };
const LETTER_ACTIONS: Record<string, RecordAction> = { A: 'ADDED', U: 'UPDATED', D: 'DELETED' };

/**
 * An entry as stored: one string, `<action letter><time in ms>:<record key>`. FerretDB stores a
 * type for every field of a document beside it, and rewrites and parses the whole block on each
 * change; as strings, a block of 500 entries costs a fraction of what sub-documents do.
 */
export function encodeLogEntry(entry: RecordLogEntry): string {
  return `${ACTION_LETTERS[entry.a]}${entry.t.getTime()}:${entry.r}`;
}

export function decodeLogEntry(text: string): RecordLogEntry {
  const colon = text.indexOf(':');
  return { a: LETTER_ACTIONS[text[0]!]!, t: new Date(Number(text.slice(1, colon))), r: text.slice(colon + 1) };
}

/**
 * A scope's change log, in blocks of `LOG_BLOCK` sequence numbers, each block one document
 * whose `_id` is built from the scope and the block's number: every read of the log is an
 * `_id` lookup, which FerretDB (on SQLite and PostgreSQL, with our launcher's index) and
 * MongoDB answer from an index, so a page costs the same whatever the scope holds. Entries are
 * keyed `s<seq>`; a record written again loses its old entry (it moved to the end). A block left
 * with no entry once all its numbers were handed out is deleted and named in its gap list
 * (`RecordLogGapsDoc`): readers pass over it without a lookup.
 */
export interface RecordLogBlockDoc {
  _id: string;
  environment_id: string;
  connection: number;
  model: string;
  variant: string;
  /** The latest change time written to the block: `modified_after` seeks by it. */
  t1: Date;
  /** Entries by `s<seq>`, each `encodeLogEntry`'s string. */
  e: Record<string, string>;
}
const recordLogBlockSchema = new Schema<RecordLogBlockDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: Number, required: true },
    model: { type: String, required: true },
    variant: { type: String, required: true },
    t1: { type: Date, required: true },
    e: { type: Schema.Types.Mixed, required: true },
  },
  { versionKey: false },
);
recordLogBlockSchema.index({ environment_id: 1, connection: 1, model: 1, variant: 1 });

/** Log blocks per gap list. */
export const GAP_LIST_BLOCKS = 500;

/**
 * A scope's blocks that emptied, by group of `GAP_LIST_BLOCKS` blocks, each group one document
 * (`_id` built from the scope and the group's number). A block named here holds no entry and
 * never will (no number of it is left to hand out), so a reader that meets a missing block reads
 * its group's list and passes over every block it names: a run of emptied blocks between two
 * records costs a lookup per 500 blocks, not one per block. Only what is known empty is listed:
 * a block a replica without gap lists writes is never skipped by mistake.
 */
export interface RecordLogGapsDoc {
  _id: string;
  environment_id: string;
  connection: number;
  model: string;
  variant: string;
  /** The numbers of the group's blocks that emptied and were deleted. */
  b: number[];
}
const recordLogGapsSchema = new Schema<RecordLogGapsDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: Number, required: true },
    model: { type: String, required: true },
    variant: { type: String, required: true },
    b: { type: [Number] },
  },
  { versionKey: false },
);
recordLogGapsSchema.index({ environment_id: 1, connection: 1, model: 1, variant: 1 });

/** A record's `_id`: a digest of where it lives and its own id (short, whatever the id's length). */
export function recordKey(environment: string, connection: number, model: string, variant: string, externalId: string): string {
  return createHash('sha256').update(JSON.stringify([environment, connection, model, variant, externalId])).digest('base64url');
}

export const recordModel = (connection: Connection) => connection.model<RecordDoc>('Record', recordSchema);
export const recordSequenceModel = (connection: Connection) => connection.model<RecordSequenceDoc>('RecordSequence', recordSequenceSchema, 'record_sequences');
export const recordLogModel = (connection: Connection) => connection.model<RecordLogBlockDoc>('RecordLogBlock', recordLogBlockSchema, 'record_log');
export const recordLogGapsModel = (connection: Connection) => connection.model<RecordLogGapsDoc>('RecordLogGaps', recordLogGapsSchema, 'record_log_gaps');

const scopeDigest = (environment: string, connection: number, model: string, variant: string) =>
  createHash('sha256').update(JSON.stringify([environment, connection, model, variant])).digest('base64url');

/** A change log block's `_id`: a digest of the scope, and the block's number. */
export function logBlockKey(environment: string, connection: number, model: string, variant: string, block: number): string {
  return `${scopeDigest(environment, connection, model, variant)}:${block}`;
}

/** A gap list's `_id`: a digest of the scope, and the group's number. */
export function logGapsKey(environment: string, connection: number, model: string, variant: string, group: number): string {
  return `${scopeDigest(environment, connection, model, variant)}:${group}`;
}
