import { runService } from '@latchkey/runtime';
import { loadGatewayConfig } from './config.js';
import { startGateway } from './start-gateway.js';

// The composition root: config, then connections (in runService), then the gateway's wiring.
await runService({ service: 'gateway', config: loadGatewayConfig(), start: (runtime, config) => startGateway(runtime, config) });
