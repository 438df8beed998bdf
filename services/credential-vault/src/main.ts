import { runMain } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';
import { startVault } from './start-vault.js';

// The composition root: config, then connections (in runMain), then the vault's wiring.
await runMain({ service: 'credential-vault', config: loadServiceConfig(), start: startVault });
