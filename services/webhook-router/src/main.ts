import { runMain } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startRouter } from './start-router.js';

// The composition root: config, then connections (in runMain), then the router's wiring.
await runMain({ service: 'webhook-router', config: loadServiceConfig(), start: startRouter });
