import type { RequestOptions } from '@latchkey/bus';
import { MAX_ACTION_INPUT_BYTES } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { GatewayDeps } from './deps.js';

/** How long the gateway waits for a synchronous action beyond the run's own limit. */
const SYNC_MARGIN_MS = 10_000;

/**
 * An action's input rides inside one NATS message to the action-runner: refuse a larger one here.
 * (Its depth was checked with the body it came in: `parsePart`, for `/action/trigger` and `/mcp`.)
 */
export function checkActionInput(input: unknown): void {
  if (input !== undefined && Buffer.byteLength(JSON.stringify(input)) > MAX_ACTION_INPUT_BYTES) {
    throw new AppError('payload_too_large', `An action's input may be at most ${MAX_ACTION_INPUT_BYTES} bytes of JSON`);
  }
}

/**
 * The wait for `action.trigger`. A run answers within its limit. A queued action answers once
 * its run is stored and its job queued, which a JetStream election can hold up past one request
 * deadline: the bus's own wait, which goes on while the runner says it is at work (a caller
 * told 503 meanwhile would retry an action already queued).
 */
export function actionTriggerWait(config: GatewayDeps['config'], async: boolean): RequestOptions {
  return async ? {} : { timeoutMs: config.FUNCTION_TIMEOUT_MS + SYNC_MARGIN_MS };
}
