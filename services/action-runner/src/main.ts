import { runMain } from '@latchkey/runtime';
import { snapshotDisabled } from './sandbox/node-flags.js';
import { loadServiceConfig } from './config.js';
import { startRunner } from './start-runner.js';

// The composition root: config, then connections (in runMain), then the runner's wiring.
const running = await runMain({ service: 'action-runner', config: loadServiceConfig(), start: startRunner });
if (!snapshotDisabled(process.execArgv, process.env['NODE_OPTIONS'])) {
  running.runtime.logger.warn('isolated-vm needs node --no-node-snapshot (or NODE_OPTIONS=--no-node-snapshot)');
}
