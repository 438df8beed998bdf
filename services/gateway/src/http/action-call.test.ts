import { describe, expect, it } from '@jest/globals';
import { actionTriggerTimeoutMs } from './action-call.js';

const config = { REQUEST_TIMEOUT_MS: 5_000, FUNCTION_TIMEOUT_MS: 60_000 } as Parameters<typeof actionTriggerTimeoutMs>[0];

describe('actionTriggerTimeoutMs', () => {
  // The gateway waited one deadline for an async trigger, while the runner may spend one reading
  // the function and the connection, then insert the run and wait up to two for JetStream to
  // take its job: a caller told 503 retried, and the action was queued twice.
  it('waits for an async trigger as long as the runner may take to store and queue the run', () => {
    expect(actionTriggerTimeoutMs(config, true)).toBeGreaterThanOrEqual(4 * config.REQUEST_TIMEOUT_MS);
  });

  it('waits for a synchronous one past the run\'s own limit', () => {
    expect(actionTriggerTimeoutMs(config, false)).toBeGreaterThan(config.FUNCTION_TIMEOUT_MS + config.REQUEST_TIMEOUT_MS);
  });
});
