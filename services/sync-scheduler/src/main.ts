import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startScheduler } from './start-scheduler.js';

// The composition root: config, then connections (in runService), then the scheduler's wiring.
await runService({ service: 'sync-scheduler', config: loadServiceConfig(), start: startScheduler });
