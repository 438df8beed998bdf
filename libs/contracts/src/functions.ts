import { z } from 'zod';
import { defineBroadcast, defineEvent, defineJob, defineRequest } from './define.js';
import { JSON_MAX_DEPTH, pathTooDeep } from './json-depth.js';
import { modelName } from './records.js';
import { SCOPES } from './scopes.js';

const environment_id = z.string().min(1);
const provider_config_key = z.string().min(1).max(128);
const functionName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/, 'letters, digits, _ and -, up to 100');
export const LIFECYCLE_EVENTS = ['post-connection-creation', 'pre-connection-deletion'] as const;

/**
 * One bundled function's code (esbuild, CommonJS, default export = the definition). It must fit
 * a NATS message beside its description, so it is capped well under the 1 MB message size.
 */
export const MAX_BUNDLE_BYTES = 768 * 1024;
/** An action's input as JSON: it rides inside one NATS message to the action-runner. */
export const MAX_ACTION_INPUT_BYTES = 512 * 1024;
/** The spec's limit on what an action may answer. */
export const MAX_ACTION_OUTPUT_BYTES = 10 * 1024 * 1024;

const model = z.object({
  name: z.string().min(1).max(128),
  fields: z.array(z.object({ name: z.string().min(1).max(128), type: z.string().max(128) })).max(500),
});

/** A JSON Schema document, kept small: it travels in every MCP `tools/list` answer. */
const MAX_INPUT_SCHEMA_BYTES = 64 * 1024;
const jsonSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  // Measured only once it can be written: JSON.stringify overflows on a value thousands deep.
  const deep = pathTooDeep(schema);
  if (deep !== undefined) ctx.addIssue({ code: 'custom', message: `nested deeper than ${JSON_MAX_DEPTH} levels`, path: deep });
  else if (Buffer.byteLength(JSON.stringify(schema)) > MAX_INPUT_SCHEMA_BYTES) ctx.addIssue({ code: 'custom', message: `at most ${MAX_INPUT_SCHEMA_BYTES} bytes of JSON` });
});

/** What a deployment records of a function (the SDK's `describeFunction`). */
export const functionDescription = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('action'),
    name: functionName,
    description: z.string().max(2000).optional(),
    has_input_schema: z.boolean(),
    /** The input's JSON Schema, where its Standard Schema can tell it (MCP tools describe their input with it). */
    input_schema: jsonSchema.optional(),
  }),
  z.strictObject({
    type: z.literal('sync'),
    name: functionName,
    description: z.string().max(2000).optional(),
    frequency: z.string().min(1).max(100),
    models: z.array(model).min(1).max(100),
    webhook_subscriptions: z.array(z.string().min(1).max(200)).max(100),
  }),
  z.strictObject({ type: z.literal('on-event'), name: functionName, event: z.enum(LIFECYCLE_EVENTS) }),
]);
export type FunctionDescriptionWire = z.infer<typeof functionDescription>;
export type FunctionType = FunctionDescriptionWire['type'];

export const deployedFunction = z.strictObject({
  description: functionDescription,
  bundle: z.string().min(1).max(MAX_BUNDLE_BYTES),
});

/** The body of `POST /functions/deployments`: every function of one integration, replacing the last deployment. */
export const deploymentBody = z
  .strictObject({ provider_config_key, functions: z.array(deployedFunction).max(200) })
  .superRefine((body, ctx) => {
    const seen = new Set<string>();
    /** Which sync declared each model: records are kept by model (and connection and variant), not by sync. */
    const modelsOf = new Map<string, string>();
    body.functions.forEach((fn, index) => {
      const key = `${fn.description.type}:${fn.description.name}`;
      if (seen.has(key)) ctx.addIssue({ code: 'custom', message: `two ${fn.description.type}s are named ${fn.description.name}`, path: ['functions', index, 'description', 'name'] });
      seen.add(key);
      // Checked here, not in `functionDescription`: deployments stored before still read back.
      if (fn.description.type !== 'sync') return;
      const sync = fn.description.name;
      fn.description.models.forEach((model, at) => {
        const path = ['functions', index, 'description', 'models', at, 'name'];
        const checked = modelName.safeParse(model.name);
        if (!checked.success) ctx.addIssue({ code: 'custom', message: `model "${model.name.slice(0, 128)}": ${checked.error.issues[0]?.message ?? 'not a model name'}`, path });
        // Two syncs writing one model would overwrite each other's records, and a full resync or a
        // variant's deletion of one would clear the other's, which its checkpoint never fetches again.
        const owner = modelsOf.get(model.name);
        if (owner !== undefined && owner !== sync) ctx.addIssue({ code: 'custom', message: `model "${model.name}" is declared by syncs ${owner} and ${sync}: a model belongs to one sync`, path });
        modelsOf.set(model.name, owner ?? sync);
      });
    });
  });
export type DeploymentBody = z.infer<typeof deploymentBody>;

/** The spec's scripts config entry, with the actions and lifecycle functions beside the syncs. */
export const scriptsConfigEntry = z.object({
  providerConfigKey: z.string(),
  version: z.number().int(),
  deployed_at: z.string(),
  syncs: z.array(
    z.object({
      name: z.string(),
      type: z.literal('sync'),
      description: z.string().optional(),
      frequency: z.string(),
      models: z.array(model),
      webhookSubscriptions: z.array(z.string()),
    }),
  ),
  actions: z.array(z.object({ name: z.string(), type: z.literal('action'), description: z.string().optional(), has_input_schema: z.boolean() })),
  onEventScripts: z.array(z.object({ name: z.string(), event: z.enum(LIFECYCLE_EVENTS) })),
});
export type ScriptsConfigEntry = z.infer<typeof scriptsConfigEntry>;

export const compileDiagnostic = z.object({
  severity: z.enum(['error', 'warning']),
  message: z.string(),
  line: z.number().int().optional(),
  column: z.number().int().optional(),
  text: z.string().optional(),
});

/** The sync-scheduler's wire: it owns deployed functions. */
export const functionsContracts = {
  /**
   * Stores a new deployment of one integration's functions and makes it current. The body
   * (`deploymentBody` as JSON) is pulled from the `upload` pull stream, so deployments are not
   * bound by the size of one NATS message.
   */
  deploy: defineRequest(
    'functions.deploy',
    z.object({ environment_id, upload: z.string().min(1) }),
    z.object({ provider_config_key: z.string(), version: z.number().int(), functions: z.array(z.object({ name: z.string(), type: z.string() })) }),
  ),
  /** One function of the current deployment, with its code. */
  get: defineRequest(
    'functions.get',
    z.object({ environment_id, provider_config_key, type: z.enum(['action', 'sync', 'on-event']), name: z.string().min(1).max(100) }),
    z.object({ version: z.number().int(), description: functionDescription, bundle: z.string() }),
  ),
  /** Names of the current deployment's lifecycle functions for an event (none when nothing is deployed). */
  listLifecycle: defineRequest(
    'functions.lifecycle.list',
    z.object({ environment_id, provider_config_key: z.string(), event: z.enum(LIFECYCLE_EVENTS) }),
    z.array(z.string()),
  ),
  /** The current deployment's syncs that handle provider webhooks, with the types they subscribe to. */
  listWebhookSyncs: defineRequest(
    'functions.webhook_syncs.list',
    z.object({ environment_id, provider_config_key: z.string() }),
    z.array(z.object({ name: z.string(), webhook_subscriptions: z.array(z.string()) })),
  ),
  /** The current deployment's actions of one integration, as MCP tools are listed (none when nothing is deployed). */
  listActions: defineRequest(
    'functions.actions.list',
    z.object({ environment_id, provider_config_key: z.string() }),
    z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: jsonSchema.optional() })),
  ),
  /** `GET /scripts/config`: the current deployment of every integration of the environment. */
  scriptsConfig: defineRequest('functions.config.list', z.object({ environment_id }), z.array(scriptsConfigEntry)),
  /** Bundles one TypeScript source with esbuild; never stores anything. */
  compile: defineRequest(
    'functions.compile',
    z.object({ source: z.string().min(1).max(512 * 1024), filename: z.string().max(200).optional() }),
    z.object({ success: z.boolean(), diagnostics: z.array(compileDiagnostic), bundle: z.string().optional(), bytes: z.number().int().optional() }),
  ),
  /** Every action-runner replica drops the functions it cached for this integration. */
  deploymentChanged: defineBroadcast(
    'functions.deployment.changed',
    z.object({ environment_id: z.string(), provider_config_key: z.string(), version: z.number().int() }),
  ),
  deployed: defineEvent(
    'functions.deployed',
    z.object({ environment_id: z.string(), provider_config_key: z.string(), version: z.number().int(), functions: z.array(z.object({ name: z.string(), type: z.string() })) }),
  ),
} as const;

/**
 * An action's output (JSON text) on its way back: inline when it fits a NATS message, else
 * as a pull stream (bus) the gateway reads chunk by chunk.
 */
export const actionOutput = z.union([z.object({ inline: z.string() }), z.object({ stream: z.string(), bytes: z.number().int() })]);
export type ActionOutput = z.infer<typeof actionOutput>;

const runError = z.object({ code: z.string(), message: z.string() });

const actionTarget = {
  environment_id,
  provider_config_key,
  connection_id: z.string().min(1).max(255),
};

/** The action-runner's wire: it runs customer code and owns action runs. */
export const actionContracts = {
  /** Runs an action now (answering with its output) or, with `async`, queues it (answering with its id). */
  trigger: defineRequest(
    'action.trigger',
    z.object({ ...actionTarget, action_name: functionName, input: z.unknown().optional(), async: z.boolean() }),
    z.union([z.object({ status: z.literal('done'), output: actionOutput }), z.object({ status: z.literal('queued'), id: z.string() })]),
  ),
  /** An async action's state, and its output once done. */
  getResult: defineRequest(
    'action.result.get',
    z.object({ environment_id, id: z.string().min(1).max(64) }),
    z.union([
      z.object({ status: z.enum(['queued', 'running']) }),
      z.object({ status: z.literal('done'), output: actionOutput }),
      z.object({ status: z.literal('failed'), error: runError }),
    ]),
  ),
  /**
   * Runs a function against a real connection without persisting anything: the source is
   * compiled first, or the deployed function of that name is used. Metadata and record writes
   * are reported, not applied. `caller_scopes` are the (expanded) scopes of the API key that
   * asked, set by the gateway: every `ctx` call of the run is checked against them. Absent (a
   * sender that predates them), the run may call nothing that needs a scope: it fails closed.
   */
  dryRun: defineRequest(
    'action.dryrun',
    z.object({
      ...actionTarget,
      caller_scopes: z.array(z.enum(SCOPES)).max(SCOPES.length).default([]),
      source: z.string().min(1).max(512 * 1024).optional(),
      function_name: functionName.optional(),
      input: z.unknown().optional(),
    }),
    z.object({
      function: z.object({ type: z.string(), name: z.string() }),
      success: z.boolean(),
      output: z.unknown().optional(),
      error: runError.optional(),
      logs: z.array(z.object({ level: z.string(), message: z.string(), at: z.string(), fields: z.record(z.string(), z.unknown()).optional() })),
      writes: z.array(z.object({ operation: z.string(), model: z.string().optional(), data: z.unknown() })),
      duration_ms: z.number(),
    }),
  ),
  /**
   * Runs the integration's `pre-connection-deletion` functions while the connection still
   * exists. Callers bound their wait and delete whatever the outcome.
   */
  runPreDeletion: defineRequest(
    'action.pre_deletion.run',
    z.object(actionTarget),
    z.object({ ran: z.number().int(), failed: z.number().int() }),
  ),
  /** A queued async action: the run's id; its input lives in the action-runner's `action_runs`. */
  run: defineJob('action.run', z.object({ environment_id: z.string(), id: z.string() })),
  /**
   * An async action finished (once per run: the event carries the JetStream message id
   * `action-<id>`). The webhook router turns it into the customer's `async_action` webhook.
   */
  asyncCompleted: defineEvent(
    'action.async_completed',
    z.object({
      environment_id: z.string(),
      id: z.string(),
      statusUrl: z.string(),
      action_name: z.string(),
      provider_config_key: z.string(),
      connection_id: z.string(),
      success: z.boolean(),
      error: runError.optional(),
      completed_at: z.string(),
    }),
  ),
} as const;
