import { consume } from '@latchkey/bus';
import { STREAMS, recordsContracts, vaultContracts } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import type { Runtime } from '@latchkey/runtime';
import type { Config } from './config.js';
import { createRecordRepo } from './db/record-repo.js';
import { listRecordsHandler, pruneRecordsHandler, writeRecordsHandler } from './handlers/records.js';

/** Wires the sync-scheduler onto a started runtime: the records store and its subjects. */
export async function startSyncScheduler(runtime: Runtime, _config: Config): Promise<void> {
  const { bus, logger, mongo } = runtime;
  const records = createRecordRepo(mongo);
  await records.init();

  const deps = { bus, records };
  bus.serve(recordsContracts.write, writeRecordsHandler(deps));
  bus.serve(recordsContracts.list, listRecordsHandler(deps));
  bus.serve(recordsContracts.prune, pruneRecordsHandler(deps));

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
