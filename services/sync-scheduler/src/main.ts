import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startSyncScheduler } from './start-sync-scheduler.js';

// The composition root: config, then connections, then handlers.
await runService({
  service: 'sync-scheduler',
  config: loadServiceConfig(),
  start: startSyncScheduler,
});
