import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startRouter } from './start-router.js';

// The composition root: config, then connections (in runService), then the router's wiring.
await runService({ service: 'webhook-router', config: loadServiceConfig(), start: startRouter });
