import { createHash } from 'node:crypto';
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
  /** `deploymentKey` of its integration and version; a random id on one stored before heads were kept. */
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

/**
 * Where an integration's current deployment is, so that a reader finds it by `_id`: FerretDB
 * answers any other query on deployments by reading every one of them, code and all. `version`
 * is at or below the newest deployment's: a deploy inserts its deployment, then raises this, and
 * a reader looks past it for the next versions by their `_id`s. A deploy cut short between the
 * two, or a raise that a concurrent one undid (FerretDB writes a document back whole), leaves
 * it behind, never naming a version that is not stored.
 */
export interface DeploymentHeadDoc {
  /** `deploymentHeadKey` of (environment, integration). */
  _id: string;
  environment_id: string;
  provider_config_key: string;
  /** 0 while the integration has no deployment. */
  version: number;
  /** That version's deployment's `_id`; null with version 0. */
  deployment_id: string | null;
}

const deploymentHeadSchema = new Schema<DeploymentHeadDoc>(
  {
    _id: { type: String, required: true },
    environment_id: { type: String, required: true },
    provider_config_key: { type: String, required: true },
    version: { type: Number, required: true },
    deployment_id: { type: String, default: null },
  },
  { collection: 'function_deployment_heads', versionKey: false },
);

export function deploymentHeadKey(environment: string, providerConfigKey: string): string {
  return createHash('sha256').update(JSON.stringify([environment, providerConfigKey])).digest('base64url');
}

/** A deployment's `_id`: its integration's head key and its version, so that the next version is found by `_id`. */
export function deploymentKey(environment: string, providerConfigKey: string, version: number): string {
  return `${deploymentHeadKey(environment, providerConfigKey)}:${version}`;
}

export const deploymentHeadModel = (connection: Connection) => connection.model<DeploymentHeadDoc>('DeploymentHead', deploymentHeadSchema);
