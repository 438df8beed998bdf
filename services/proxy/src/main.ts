import { runMain } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startProxy } from './start-proxy.js';

// The composition root: config, then connections (in runMain), then the proxy's wiring.
await runMain({ service: 'proxy', config: loadServiceConfig(), start: startProxy });
