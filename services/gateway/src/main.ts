import { runMain } from '@latchkey/runtime';
import { loadGatewayConfig } from './config.js';
import { startGateway } from './start-gateway.js';

// The composition root: config, then connections (in runMain), then the gateway's wiring.
// Its probes live on PORT: the port answers them (not ready) from the first moment, while NATS,
// JetStream and MongoDB are awaited, and is handed to the API once wired.
const config = loadGatewayConfig();
await runMain({ service: 'gateway', config, httpPort: config.PORT, start: (runtime, started) => startGateway(runtime, started) });
