import { describe, expect, it } from '@jest/globals';
import { Latchkey } from './client.js';
import { ACTION_TIMEOUT_MS, proxyTimeoutMs } from './timeouts.js';

describe('the default timeouts', () => {
  it("outlast the server's own waits, so that its answer (a timeout of its own included) arrives first", () => {
    // POST /action/trigger: FUNCTION_TIMEOUT_MS (60 s by default) + 10 s.
    expect(ACTION_TIMEOUT_MS).toBeGreaterThan(60_000 + 10_000);
    // /proxy with `Retries: n`: (PROXY_TIMEOUT_MS (30 s by default) + 10 s) × (n + 1) + 5 s.
    for (let retries = 0; retries <= 10; retries++) expect(proxyTimeoutMs(retries)).toBeGreaterThan((30_000 + 10_000) * (retries + 1) + 5_000);
  });
});
