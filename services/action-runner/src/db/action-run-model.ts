import { Schema, type Connection } from 'mongoose';

export type ActionRunStatus = 'queued' | 'running' | 'done' | 'failed';

/**
 * An async action: queued by `action.trigger`, run by the `jobs.action.run` consumer. Input and
 * output are stored as JSON text (any keys, no field-name rules). A run that is `done` or
 * `failed` (its outcome stored: `ActionRunOutcomeDoc`) is never run again, whatever JetStream redelivers.
 */
export interface ActionRunDoc {
  _id: string;
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  action_name: string;
  input_json: string | null;
  status: ActionRunStatus;
  output_json: string | null;
  error: { code: string; message: string } | null;
  attempts: number;
  created_at: Date;
  completed_at: Date | null;
}

const actionRunSchema = new Schema<ActionRunDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    connection_id: { type: String, required: true },
    action_name: { type: String, required: true },
    input_json: { type: String, default: null },
    status: { type: String, required: true },
    output_json: { type: String, default: null },
    error: { type: Schema.Types.Mixed, default: null },
    attempts: { type: Number, default: 0 },
    created_at: { type: Date, required: true },
    completed_at: { type: Date, default: null },
  },
  { collection: 'action_runs', versionKey: false },
);
actionRunSchema.index({ environment_id: 1, _id: 1 });
actionRunSchema.index({ completed_at: 1 });

export const actionRunModel = (connection: Connection) => connection.model<ActionRunDoc>('ActionRun', actionRunSchema);

/**
 * The outcome of an async action, stored once: the first delivery to insert it (`_id` is the
 * run's) finished the run, and every later one reads it. An insert is the one write FerretDB 1.24
 * makes atomically (the unique `_id` refuses the second); a conditional update of the run is not
 * (it reads the document and writes it back), so two deliveries of one run both finished it. The
 * run keeps a copy of it (`status`, `output_json`, `error`, `completed_at`), for earlier versions
 * and the sweep; readers take this one.
 */
export interface ActionRunOutcomeDoc {
  _id: string;
  environment_id: string;
  status: Extract<ActionRunStatus, 'done' | 'failed'>;
  output_json: string | null;
  error: { code: string; message: string } | null;
  completed_at: Date;
}

const actionRunOutcomeSchema = new Schema<ActionRunOutcomeDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    status: { type: String, required: true },
    output_json: { type: String, default: null },
    error: { type: Schema.Types.Mixed, default: null },
    completed_at: { type: Date, required: true },
  },
  { collection: 'action_run_outcomes', versionKey: false },
);
actionRunOutcomeSchema.index({ completed_at: 1 });

export const actionRunOutcomeModel = (connection: Connection) => connection.model<ActionRunOutcomeDoc>('ActionRunOutcome', actionRunOutcomeSchema);
