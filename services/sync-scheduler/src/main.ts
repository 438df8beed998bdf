import { runMain } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startScheduler } from './start-scheduler.js';

// The composition root: config, then connections (in runMain), then the scheduler's wiring.
await runMain({ service: 'sync-scheduler', config: loadServiceConfig(), start: startScheduler });
