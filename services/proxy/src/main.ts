import { runMain } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startProxy } from './start-proxy.js';

// The composition root: config, then the NATS connection (in runMain; the proxy keeps no
// database), then the proxy's wiring.
await runMain({ service: 'proxy', database: false, config: loadServiceConfig(), start: startProxy });
