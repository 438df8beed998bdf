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

/** The last sequence number handed out per (environment, connection, model, variant). */
interface RecordSequenceDoc {
  _id: string;
  seq: number;
}
const recordSequenceSchema = new Schema<RecordSequenceDoc>({ _id: { type: String, required: true }, seq: { type: Number, required: true } }, { versionKey: false });

/** A record's `_id`: a digest of where it lives and its own id (short, whatever the id's length). */
export function recordKey(environment: string, connection: number, model: string, variant: string, externalId: string): string {
  return createHash('sha256').update(JSON.stringify([environment, connection, model, variant, externalId])).digest('base64url');
}

export const recordModel = (connection: Connection) => connection.model<RecordDoc>('Record', recordSchema);
export const recordSequenceModel = (connection: Connection) => connection.model<RecordSequenceDoc>('RecordSequence', recordSequenceSchema, 'record_sequences');
