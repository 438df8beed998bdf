import { createTypeChecker } from '@latchkey/cli';
import { consume } from '@latchkey/bus';
import { STREAMS, functionsContracts, recordsContracts, vaultContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { Runtime } from '@latchkey/runtime';
import type { Config } from './config.js';
import { createDeploymentRepo } from './db/deployment-repo.js';
import { createRecordRepo } from './db/record-repo.js';
import { listRecordsHandler, pruneRecordsHandler, writeRecordsHandler } from './handlers/records.js';
import { compileHandler, deployHandler, getFunctionHandler, listLifecycleHandler, listWebhookSyncsHandler, scriptsConfigHandler } from './handlers/functions.js';

/** Wires the sync-scheduler: deployed functions, the records store, and their subjects (schedules arrive with the syncs work). */
export async function startScheduler(runtime: Runtime, config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
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

  const records = createRecordRepo(mongo);
  await records.init();
  bus.serve(recordsContracts.write, writeRecordsHandler({ bus, records }));
  bus.serve(recordsContracts.list, listRecordsHandler({ bus, records }));
  bus.serve(recordsContracts.prune, pruneRecordsHandler({ bus, records }));
  // A deleted connection's records go with it (idempotent: a redelivery deletes nothing more).
  const deletions = await consume({
    bus,
    logger,
    stream: STREAMS.events.name,
    durable: 'sync-scheduler-connection-deleted',
    contract: vaultContracts.connectionDeleted,
    concurrency: 4,
    handler: async (event) => {
      const count = await records.deleteConnection(environmentId(event.environment_id), event.id);
      if (count > 0) logger.info('deleted the records of a deleted connection', { connection: event.id, count });
    },
  });
  runtime.onShutdown(() => deletions.stop());
}
