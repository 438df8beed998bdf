import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startVault } from './start-vault.js';

// The composition root: config, then connections (in runService), then the vault's wiring.
await runService({ service: 'credential-vault', config: loadServiceConfig(), start: startVault });
