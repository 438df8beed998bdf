import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startProxy } from './start-proxy.js';

// The composition root: config, then connections (in runService), then the proxy's wiring.
await runService({ service: 'proxy', config: loadServiceConfig(), start: startProxy });
