import { Schema, type Connection } from 'mongoose';
import type { FunctionDescriptionWire } from '@latchkey/contracts';

export interface DeployedFunctionDoc {
  type: FunctionDescriptionWire['type'];
  name: string;
  description: FunctionDescriptionWire;
  bundle: string;
}

/**
 * One deployment of one integration's functions. A deployment is written whole, by one insert,
 * and the current one is the highest version: a redeploy swaps every function at once, and a
 * reader never sees half of one. The unique index settles two concurrent deploys.
 */
export interface DeploymentDoc {
  _id: string;
  environment_id: string;
  provider_config_key: string;
  version: number;
  functions: DeployedFunctionDoc[];
  created_at: Date;
}

const functionSchema = new Schema<DeployedFunctionDoc>(
  {
    type: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: Schema.Types.Mixed, required: true },
    bundle: { type: String, required: true },
  },
  { _id: false },
);

const deploymentSchema = new Schema<DeploymentDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    version: { type: Number, required: true },
    functions: { type: [functionSchema], default: [] },
    created_at: { type: Date, required: true },
  },
  { collection: 'function_deployments', versionKey: false },
);
deploymentSchema.index({ environment_id: 1, provider_config_key: 1, version: -1 }, { unique: true });

/**
 * A description as stored. An action's input JSON Schema is kept as JSON text: its keys
 * (`$schema`, `$defs`, `$ref`) start with `$`, which MongoDB-wire servers refuse as field names.
 */
type StoredDescription = Exclude<FunctionDescriptionWire, { type: 'action' }> | (Omit<Extract<FunctionDescriptionWire, { type: 'action' }>, 'input_schema'> & { input_schema_json?: string });

export function toStoredDescription(description: FunctionDescriptionWire): StoredDescription {
  if (description.type !== 'action' || description.input_schema === undefined) return description;
  const { input_schema, ...rest } = description;
  return { ...rest, input_schema_json: JSON.stringify(input_schema) };
}

export function fromStoredDescription(stored: StoredDescription): FunctionDescriptionWire {
  if (stored.type !== 'action' || stored.input_schema_json === undefined) return stored as FunctionDescriptionWire;
  const { input_schema_json, ...rest } = stored;
  return { ...rest, input_schema: JSON.parse(input_schema_json) as Record<string, unknown> };
}

export const deploymentModel = (connection: Connection) => connection.model<DeploymentDoc>('Deployment', deploymentSchema);
