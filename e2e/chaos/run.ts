import { SERVICE_NAMES } from '@latchkey/contracts';
import { formatFailures, formatTable, killNatsNode, killReplica, restartDatabase, rollingRestart, runChaos, startRig, type ChaosReport } from './chaos.js';

/**
 * `make chaos`: the full schedule against two replicas of every service on a three-node NATS
 * cluster, under a steady mixed load; prints the table of what held per fault and exits 1 when
 * anything accepted was lost, duplicated or left hanging, or the synced records afterwards miss
 * or repeat an item.
 */
const REPLICAS = 2;
const log = (line: string) => process.stdout.write(`${line}\n`);

const rig = await startRig({ replicas: REPLICAS, natsCluster: true });
let result: ChaosReport;
try {
  result = await runChaos(rig, {
    quietMs: 8000,
    log,
    faults: [
      killNatsNode(0, 10_000),
      killNatsNode(1, 10_000),
      ...SERVICE_NAMES.map((service) => killReplica(service, 0, 3000)),
      restartDatabase(5000),
      rollingRestart(SERVICE_NAMES, REPLICAS),
    ],
  });
} finally {
  await rig.dispose();
}
const { windows: rows, records } = result;
log('');
log(formatTable(result));
log('');
log(formatFailures(rows));
const broken = rows.filter(
  (row) => row.webhooksLost + row.webhooksDuplicated + row.deliveriesDuplicated + row.actionsIncomplete + row.actionsDuplicated + row.refreshFailures + row.hung > 0 || row.tokenRequestsPerExpiry > 1,
);
const recordsBroken = records.missing + records.repeated + records.unexpected + records.deleted > 0 || !records.pagingEnded || records.finalRun !== 'SUCCESS';
if (broken.length > 0 || recordsBroken) {
  log(`\nfailed: ${[...broken.map((row) => row.fault), ...(recordsBroken ? ['records'] : [])].join('; ')}`);
  process.exit(1);
}
process.exit(0);
