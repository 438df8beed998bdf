import type { Bus, OperationLog } from '@latchkey/bus';
import type { Logger } from '@latchkey/logger';
import type { ActionRunRepo } from '../db/action-run-repo.js';
import type { KnownConnections } from './known-connections.js';
import type { Runner } from './run-function.js';

/** What the action handlers are given by the wiring (start-runner.ts). */
export interface ActionDeps {
  bus: Bus;
  logger: Logger;
  runner: Runner;
  runs: ActionRunRepo;
  connections: KnownConnections;
  /** How long a served output stream waits for the gateway to read it. */
  streamIdleMs: number;
  /** The operations log: one `action_run` per run (async runs when they end). */
  operations: Pick<OperationLog, 'record'>;
}
