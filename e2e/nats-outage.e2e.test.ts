import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { http, startStack, type Stack } from './support/stack.js';

/**
 * Every service's REQUEST_TIMEOUT_MS: the services' 5 s. It bounds every call of the stack, the
 * ones that must succeed too (1.5 s was a bet on a loaded machine, right after NATS came back
 * above all); what is checked is that the outage is answered by it, not waited out.
 */
const DEADLINE_MS = 5_000;
let stack: Stack;

beforeAll(async () => {
  // A limit this small makes every request reserve its budget in NATS KV.
  stack = await startStack({ env: { REQUEST_TIMEOUT_MS: String(DEADLINE_MS), RATE_LIMIT_PER_MINUTE: '5' } });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('a NATS outage', () => {
  it('gives 503 service_unavailable within the deadline, then recovers by itself', async () => {
    const call = () => http(`${stack.url}/environment-variables`, { token: stack.bootstrapKey });
    // In a window's last tenth the limiter reserves the next window's first slice ahead, so a
    // request in the next minute needs no NATS (its design for a leader election): the calls
    // before and during the outage stay in one minute, away from its last 10 s.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
    expect((await call()).status).toBe(200);

    await stack.nats.stop();
    const started = Date.now();
    const during = await call();
    const elapsed = Date.now() - started;
    expect(during.status).toBe(503);
    expect(during.json.error.code).toBe('service_unavailable');
    expect(elapsed).toBeLessThan(DEADLINE_MS + 5_000);

    const readyStarted = Date.now();
    const ready = await http(`${stack.url}/ready`);
    expect(ready.status).toBe(503);
    expect(Date.now() - readyStarted).toBeLessThan(DEADLINE_MS + 5_000);

    await stack.nats.start();
    const deadline = Date.now() + 30_000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await http(`${stack.url}/ready`)).status;
      if (status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(200);
    expect((await call()).status).toBe(200);
  }, 90_000);
});
