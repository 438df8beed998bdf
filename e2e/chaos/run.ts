import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_NAMES } from '@latchkey/contracts';
import { repoRoot } from '@latchkey/testing';
import { duplicateSummary, formatFailures, formatTable, refreshSummary, syncTimeline, killNatsNode, killReplica, restartDatabase, rollingRestart, runChaos, startRig, type ChaosReport } from './chaos.js';

/**
 * `make chaos`: the full schedule against two replicas of every service on a three-node NATS
 * cluster, under a steady mixed load; prints the table of what held per fault and exits 1 when
 * anything accepted was lost, duplicated or left hanging, or the synced records afterwards miss
 * or repeat an item.
 */
const REPLICAS = 2;
const log = (line: string) => process.stdout.write(`${line}\n`);

const rig = await startRig({ replicas: REPLICAS, natsCluster: true });
/**
 * What the CI-sized test prints, to tell why a run failed: the provider's refreshes, repeated
 * deliveries, the services' last warnings and errors (reconnects left out; all of them in
 * .data/chaos-warnings.log).
 */
const diagnose = () => {
  log(`\nrefreshes: ${refreshSummary(rig)}\n\nduplicates:\n${duplicateSummary(rig)}\n`);
  const warnings = rig.errors.filter((line) => !/nats (dis|re)connected|jetstream not available|sync_scheduler_lease/.test(line));
  const file = join(repoRoot(), '.data', 'chaos-warnings.log');
  writeFileSync(file, `${warnings.join('\n')}\n`);
  log(`the services' last warnings and errors (all ${warnings.length} in ${file}):\n${warnings.slice(-60).join('\n')}`);
};
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
} catch (error) {
  log(`\nstopped: ${error instanceof Error ? error.message : String(error)}`);
  diagnose();
  throw error;
} finally {
  await rig.dispose();
}
const { windows: rows, records } = result;
log('');
log(formatTable(result));
log('');
log(formatFailures(rows));
log('');
log(`sync status: ${syncTimeline(result.syncStatuses)}`);
const broken = rows.filter(
  (row) => row.webhooksLost + row.webhooksDuplicated + row.deliveriesDuplicated + row.actionsIncomplete + row.actionsDuplicated + row.refreshFailures + row.hung > 0 || row.tokenRequestsPerExpiry > 1,
);
const recordsBroken = records.missing + records.repeated + records.unexpected + records.deleted > 0 || !records.pagingEnded || records.finalRun !== 'SUCCESS';
if (broken.length > 0 || recordsBroken) {
  log(`\nfailed: ${[...broken.map((row) => row.fault), ...(recordsBroken ? ['records'] : [])].join('; ')}`);
  diagnose();
  process.exit(1);
}
process.exit(0);
