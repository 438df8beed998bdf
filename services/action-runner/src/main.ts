import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startRunner } from './start-runner.js';

// The composition root: config, then connections (in runService), then the runner's wiring.
await runService({ service: 'action-runner', config: loadServiceConfig(), start: startRunner });
