import { Schema, type Connection } from 'mongoose';

/** What happened when a refresh failed: the `log_id` of a connection's `auth` error points here. */
export interface RefreshLogDoc {
  _id: string;
  environment_id: string;
  connection: string;
  at: Date;
  code: string;
  message: string;
  /** The provider's answer, reduced to fields without secrets. */
  payload: Record<string, unknown> | null;
}

const refreshLogSchema = new Schema<RefreshLogDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    connection: { type: String, required: true },
    at: { type: Date, required: true },
    code: { type: String, required: true },
    message: { type: String, required: true },
    payload: { type: Schema.Types.Mixed, default: null },
  },
  { collection: 'refresh_logs', versionKey: false },
);
refreshLogSchema.index({ environment_id: 1, connection: 1, at: -1 });

export const refreshLogModel = (connection: Connection) => connection.model<RefreshLogDoc>('RefreshLog', refreshLogSchema);
