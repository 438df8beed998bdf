import { createTypeChecker } from '@latchkey/cli';
import { functionsContracts } from '@latchkey/contracts';
import type { Runtime } from '@latchkey/runtime';
import type { Config } from './config.js';
import { createDeploymentRepo } from './db/deployment-repo.js';
import { compileHandler, deployHandler, getFunctionHandler, listLifecycleHandler, listWebhookSyncsHandler, scriptsConfigHandler } from './handlers/functions.js';

/** Wires the sync-scheduler: deployed functions and their subjects (schedules arrive with the syncs work). */
export async function startScheduler(runtime: Runtime, config: Config): Promise<void> {
  const { bus, mongo } = runtime;
  const deployments = createDeploymentRepo(mongo);
  await deployments.init();
  const deps = { bus, deployments, maxDeploymentBytes: config.MAX_DEPLOYMENT_BYTES };
  bus.serve(functionsContracts.deploy, deployHandler(deps));
  bus.serve(functionsContracts.get, getFunctionHandler(deps));
  bus.serve(functionsContracts.listLifecycle, listLifecycleHandler(deps));
  bus.serve(functionsContracts.listWebhookSyncs, listWebhookSyncsHandler(deps));
  bus.serve(functionsContracts.scriptsConfig, scriptsConfigHandler(deps));
  const typeChecker = createTypeChecker();
  bus.serve(functionsContracts.compile, compileHandler({ typeChecker }));
  runtime.onShutdown(() => typeChecker.close());
}
