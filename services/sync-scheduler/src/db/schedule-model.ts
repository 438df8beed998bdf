import { createHash } from 'node:crypto';
import { Schema, type Connection } from 'mongoose';
import type { ModelCounts } from '@latchkey/contracts';

/** One sync of one connection in one variant: when it runs, whether it may, and how it last went. */
export interface ScheduleDoc {
  /** `scheduleKey` of (environment, integration, connection, sync, variant). */
  _id: string;
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  /**
   * The vault's numeric id of the connection it was made for: a name deleted and taken again is
   * another connection, whose schedules start afresh. Null on a schedule made before it was kept.
   */
  connection?: number | null;
  sync_name: string;
  variant: string;
  /** The deployment's frequency. */
  frequency: string;
  /** A per-connection override (`PUT /sync/update-connection-frequency`); null = the deployment's. */
  frequency_override: string | null;
  paused: boolean;
  /** The run in flight, for status and the due query; the claim itself is the `sync_run_slots` insert. */
  running: string | null;
  next_run_at: Date | null;
  last_status: 'SUCCESS' | 'ERROR' | null;
  last_finished_at: Date | null;
  last_results: ModelCounts;
  last_error: { code: string; message: string } | null;
  /** The function's checkpoint (`ctx.saveCheckpoint`); null when none is kept. */
  checkpoint: Record<string, unknown> | null;
  created_at: Date;
}

/** A schedule as the leader's due index needs it: its target, times and state, without what only a run reads. */
export type ScheduleTiming = Omit<ScheduleDoc, 'checkpoint' | 'last_results' | 'last_error'>;

const scheduleSchema = new Schema<ScheduleDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    connection_id: { type: String, required: true },
    connection: { type: Number, default: null },
    sync_name: { type: String, required: true },
    variant: { type: String, required: true },
    frequency: { type: String, required: true },
    frequency_override: { type: String, default: null },
    paused: { type: Boolean, required: true },
    running: { type: String, default: null },
    next_run_at: { type: Date, default: null },
    last_status: { type: String, default: null },
    last_finished_at: { type: Date, default: null },
    last_results: { type: Schema.Types.Mixed, default: {} },
    last_error: { type: Schema.Types.Mixed, default: null },
    // Its JSON text: a function's keys may hold '.' or start with '$', which document databases
    // refuse in field names (FerretDB always). A schedule saved before holds the object itself.
    checkpoint: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
scheduleSchema.index({ environment_id: 1, provider_config_key: 1, connection_id: 1 });
scheduleSchema.index({ next_run_at: 1 });

export function scheduleKey(environment: string, providerConfigKey: string, connectionId: string, syncName: string, variant: string): string {
  return createHash('sha256').update(JSON.stringify([environment, providerConfigKey, connectionId, syncName, variant])).digest('base64url');
}

export const scheduleModel = (connection: Connection) => connection.model<ScheduleDoc>('SyncSchedule', scheduleSchema, 'sync_schedules');

/** One run of a schedule. */
export interface SyncRunDoc {
  _id: string;
  environment_id: string;
  schedule_id: string;
  provider_config_key: string;
  connection_id: string;
  sync_name: string;
  variant: string;
  status: 'QUEUED' | 'RUNNING' | 'SUCCESS' | 'ERROR';
  /**
   * How many times the run was claimed by a runner (`sync.run.begin`): the latest attempt alone
   * may write, report and end it. Absent on runs never begun, and on runs stored before it.
   */
  attempt?: number;
  /** What the run wrote: reported as it goes while it runs, final once it finished. */
  results: ModelCounts;
  error: { code: string; message: string } | null;
  created_at: Date;
  /**
   * When its job was stored in JetStream (the enqueue acknowledged): from then on the run waits
   * its turn there, and is not taken for lost before SYNC_RUN_STALE_MS. Null until then, and
   * absent on runs stored before it was kept.
   */
  queued_at?: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
}

const syncRunSchema = new Schema<SyncRunDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    schedule_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    connection_id: { type: String, required: true },
    sync_name: { type: String, required: true },
    variant: { type: String, required: true },
    status: { type: String, required: true },
    attempt: { type: Number },
    results: { type: Schema.Types.Mixed, default: {} },
    error: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true },
    queued_at: { type: Date, default: null },
    started_at: { type: Date, default: null },
    finished_at: { type: Date, default: null },
  },
  { versionKey: false, minimize: false },
);
syncRunSchema.index({ schedule_id: 1, created_at: -1 });
// The sweep of old runs: finished before a time, or never finished and created before one.
syncRunSchema.index({ finished_at: 1, created_at: 1 });

export const syncRunModel = (connection: Connection) => connection.model<SyncRunDoc>('SyncRun', syncRunSchema, 'sync_runs');

/**
 * A schedule's run in flight: `_id` is the schedule's, so a second claim fails on the unique
 * `_id` (an atomic insert on every backend, unlike a conditional update on FerretDB).
 */
export interface RunSlotDoc {
  _id: string;
  run_id: string;
  claimed_at: Date;
}

const runSlotSchema = new Schema<RunSlotDoc>(
  { _id: { type: String, required: true }, run_id: { type: String, required: true }, claimed_at: { type: Date, required: true } },
  { versionKey: false },
);

export const runSlotModel = (connection: Connection) => connection.model<RunSlotDoc>('SyncRunSlot', runSlotSchema, 'sync_run_slots');
