import { Schema, type Connection } from 'mongoose';

export interface AccountDoc {
  _id: string;
  name: string;
  created_at: Date;
}

const accountSchema = new Schema<AccountDoc>(
  {
    _id: { type: String, required: true },
    name: { type: String, required: true },
    created_at: { type: Date, required: true },
  },
  { collection: 'accounts', versionKey: false },
);
accountSchema.index({ name: 1 }, { unique: true });

export const accountModel = (connection: Connection) => connection.model<AccountDoc>('Account', accountSchema);
