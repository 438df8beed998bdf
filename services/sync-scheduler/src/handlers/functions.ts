import { pullAll, parseOrThrow, type Bus } from '@latchkey/bus';
import type { Compiler } from '@latchkey/compiler';
import { MAX_BUNDLE_BYTES, deploymentBody, functionsContracts, vaultContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import type { DeploymentRepo } from '../db/deployment-repo.js';
import { frequencyProblem, parseFrequency } from '../domain/frequency.js';
import { scriptsConfig } from '../domain/scripts-config.js';

export interface FunctionsDeps {
  bus: Bus;
  deployments: DeploymentRepo;
  /** The largest deployment body accepted (JSON bytes). */
  maxDeploymentBytes: number;
  /** The shortest sync frequency (SYNC_MIN_FREQUENCY_MS). */
  minFrequencyMs: number;
}

export function deployHandler(deps: FunctionsDeps) {
  return async (request: RequestOf<typeof functionsContracts.deploy>) => {
    const raw = await pullAll(deps.bus, request.upload, deps.bus.requestTimeoutMs, deps.maxDeploymentBytes);
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new AppError('invalid_json', 'The deployment is not JSON');
    }
    const body = parseOrThrow(deploymentBody, json, 'deployment');
    for (const { description } of body.functions) {
      if (description.type === 'sync' && parseFrequency(description.frequency, deps.minFrequencyMs) === undefined) {
        throw new AppError('invalid_frequency', `Sync "${description.name}": ${frequencyProblem(description.frequency, deps.minFrequencyMs)}`);
      }
    }
    const environment = environmentId(request.environment_id);
    // The integration must exist (404 unknown_provider_config otherwise).
    await deps.bus.request(vaultContracts.getIntegration, {
      environment_id: environment,
      unique_key: body.provider_config_key,
      include_webhook: false,
      include_credentials: false,
    });
    const doc = await deps.deployments.insertNext(
      environment,
      body.provider_config_key,
      body.functions.map((fn) => ({ type: fn.description.type, name: fn.description.name, description: fn.description, bundle: fn.bundle })),
    );
    const functions = doc.functions.map((fn) => ({ name: fn.name, type: fn.type }));
    const change = { environment_id: environment, provider_config_key: doc.provider_config_key, version: doc.version };
    deps.bus.broadcast(functionsContracts.deploymentChanged, change);
    await deps.bus.publish(functionsContracts.deployed, { ...change, functions });
    return { provider_config_key: doc.provider_config_key, version: doc.version, functions };
  };
}

export function getFunctionHandler(deps: Pick<FunctionsDeps, 'deployments'>) {
  return async (request: RequestOf<typeof functionsContracts.get>) => {
    const deployment = await deps.deployments.current(environmentId(request.environment_id), request.provider_config_key);
    const found = deployment?.functions.find((fn) => fn.type === request.type && fn.name === request.name);
    if (!deployment || !found) {
      const what = request.type === 'action' ? 'unknown_action' : 'unknown_function';
      throw new AppError(what, `No ${request.type} "${request.name}" is deployed for integration "${request.provider_config_key}"`);
    }
    return { version: deployment.version, description: found.description, bundle: found.bundle };
  };
}

export function listLifecycleHandler(deps: Pick<FunctionsDeps, 'deployments'>) {
  return async (request: RequestOf<typeof functionsContracts.listLifecycle>) => {
    const deployment = await deps.deployments.currentDescriptions(environmentId(request.environment_id), request.provider_config_key);
    return (deployment?.functions ?? [])
      .filter((fn) => fn.description.type === 'on-event' && fn.description.event === request.event)
      .map((fn) => fn.name);
  };
}

export function listActionsHandler(deps: Pick<FunctionsDeps, 'deployments'>) {
  return async (request: RequestOf<typeof functionsContracts.listActions>) => {
    const deployment = await deps.deployments.currentDescriptions(environmentId(request.environment_id), request.provider_config_key);
    return (deployment?.functions ?? []).flatMap(({ description }) =>
      description.type === 'action'
        ? [
            {
              name: description.name,
              ...(description.description === undefined ? {} : { description: description.description }),
              ...(description.input_schema === undefined ? {} : { input_schema: description.input_schema }),
            },
          ]
        : [],
    );
  };
}

export function scriptsConfigHandler(deps: Pick<FunctionsDeps, 'deployments'>) {
  return async (request: RequestOf<typeof functionsContracts.scriptsConfig>) =>
    scriptsConfig(await deps.deployments.summaries(environmentId(request.environment_id)));
}

/**
 * Compiles submitted source in the compiler's child process (empty environment; imports only
 * `@latchkey/functions`; diagnostics quote only the source). Runs nothing.
 */
export function compileHandler(deps: { compiler: Pick<Compiler, 'compile'> }) {
  return async (request: RequestOf<typeof functionsContracts.compile>) => {
    const result = await deps.compiler.compile(request.source, request.filename);
    if (!result.ok) return { success: false, diagnostics: result.diagnostics };
    const bytes = Buffer.byteLength(result.bundle);
    if (bytes > MAX_BUNDLE_BYTES) {
      return {
        success: false,
        diagnostics: [...result.diagnostics, { severity: 'error' as const, message: `the bundle is ${bytes} bytes; the limit is ${MAX_BUNDLE_BYTES}` }],
      };
    }
    return { success: true, diagnostics: result.diagnostics, bundle: result.bundle, bytes };
  };
}

export function listWebhookSyncsHandler(deps: Pick<FunctionsDeps, 'deployments'>) {
  return async (request: RequestOf<typeof functionsContracts.listWebhookSyncs>) => {
    const deployment = await deps.deployments.currentDescriptions(environmentId(request.environment_id), request.provider_config_key);
    return (deployment?.functions ?? []).flatMap((fn) =>
      fn.description.type === 'sync' && fn.description.webhook_subscriptions.length > 0
        ? [{ name: fn.name, webhook_subscriptions: fn.description.webhook_subscriptions }]
        : [],
    );
  };
}
