import type { AnyContract } from './define.js';
import { givenUpContracts } from './bus.js';
import { actionContracts, functionsContracts } from './functions.js';
import { gatewayContracts } from './gateway.js';
import { operationsContracts } from './operations.js';
import { ping } from './services.js';
import { proxyContracts } from './proxy.js';
import { recordsContracts } from './records.js';
import { syncContracts } from './syncs.js';
import { vaultContracts } from './vault.js';
import { vaultWebhookContracts, webhookContracts } from './webhooks.js';

/** Every contract, for the uniqueness test and for tooling that lists the wire. */
export const allContracts: readonly AnyContract[] = [
  ...Object.values(ping),
  ...Object.values(gatewayContracts),
  ...Object.values(vaultContracts),
  ...Object.values(proxyContracts),
  ...Object.values(recordsContracts),
  ...Object.values(webhookContracts),
  ...Object.values(vaultWebhookContracts),
  ...Object.values(functionsContracts),
  ...Object.values(actionContracts),
  ...Object.values(syncContracts),
  ...Object.values(givenUpContracts),
  ...Object.values(operationsContracts),
];
