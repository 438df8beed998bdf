import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { deployWithCli, eventually, FUNCTIONS_DIR } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

// SIGTERM, as Kubernetes sends it: each service stops taking work and finishes or hands back
// what it holds, with the other replicas carrying on; nothing a caller started fails.

const READY_DELAY_MS = 1500;
let stack: Stack;
let upstream: TestUpstreamApi;
let receiver: Receiver;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
const call = (path: string) =>
  fetch(`${stack.url}/proxy${path}`, {
    headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'conn-1', 'provider-config-key': 'api' },
  }).then(async (response) => ({ status: response.status, body: await response.text() }));
/** The upstream calls of the tests' own slow paths: the deployed `items` sync may call it too. */
const slowCalls = () => upstream.requests.filter((request) => request.path.startsWith('/slow/'));
const exitOf = (proc: Stack['services'][number]) =>
  new Promise<number | null>((resolve) => (proc.child.exitCode !== null ? resolve(proc.child.exitCode) : proc.child.once('exit', (code) => resolve(code))));

beforeAll(async () => {
  upstream = await startUpstreamApi();
  receiver = await startReceiver(await freePort());
  stack = await startStack({
    replicas: { proxy: 2, 'action-runner': 2 },
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', SHUTDOWN_TIMEOUT_MS: '15000' },
    serviceEnv: {
      gateway: { SHUTDOWN_READY_DELAY_MS: String(READY_DELAY_MS) },
      'action-runner': { FUNCTION_CONCURRENCY: '2' },
      'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    },
  });
  await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { webhook_url: receiver.url } });
  await seedApiKeyConnection(stack, 'api', 'conn-1', 'k');
  await deployWithCli(FUNCTIONS_DIR, stack);
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  await receiver?.close();
});

describe('graceful shutdown', () => {
  it('a proxy replica given SIGTERM answers the calls it holds, exits 0, and the other replica takes new calls', async () => {
    const [first, second] = stack.services.filter((proc) => proc.service === 'proxy');
    upstream.reset();
    // Calls a few ms apart leave the gateway one message each, so both replicas hold some.
    const inFlight: Array<ReturnType<typeof call>> = [];
    for (let n = 0; n < 12; n++) {
      inFlight.push(call(`/slow/${2500 + n}`));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await eventually(async () => (slowCalls().length === 12 ? true : undefined), 10_000, 'every slow call to reach the upstream');
    const exited = exitOf(first!);
    first!.child.kill('SIGTERM');
    // New calls while it drains and after it left go to the other replica.
    const during = await Promise.all(Array.from({ length: 10 }, () => call('/echo/during')));
    const results = await Promise.all(inFlight);
    expect(results.map((result) => result.status)).toEqual(results.map(() => 200));
    expect(during.map((result) => result.status)).toEqual(during.map(() => 200));
    expect(await exited).toBe(0);
    // Each slow call reached the upstream once: answered, never retried elsewhere.
    const slowPaths = slowCalls().map((request) => request.path);
    expect(new Set(slowPaths).size).toBe(12);
    expect(slowPaths).toHaveLength(12);
    const after = await Promise.all(Array.from({ length: 10 }, () => call('/echo/after')));
    expect(after.every((result) => result.status === 200)).toBe(true);
    expect(second!.child.exitCode).toBeNull();
  }, 60_000);

  it('an action-runner replica given SIGTERM during async actions: each action completes exactly once', async () => {
    upstream.reset();
    const ids: string[] = [];
    for (let n = 0; n < 8; n++) {
      const response = await fetch(`${stack.url}/action/trigger`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'api', 'x-async': 'true' },
        // A distinct upstream path per action, to count the runs of each.
        body: JSON.stringify({ action_name: 'slow-echo', input: { n, ms: 1500 + n } }),
      });
      expect(response.status).toBe(202);
      ids.push(((await response.json()) as { id: string }).id);
    }
    await eventually(async () => (slowCalls().length >= 2 ? true : undefined), 20_000, 'runs to start');
    const runner = stack.services.find((proc) => proc.service === 'action-runner')!;
    const exited = exitOf(runner);
    runner.child.kill('SIGTERM');
    expect(await exited).toBe(0);

    const outputs = await eventually(
      async () => {
        const results = await Promise.all(ids.map((id) => api('GET', `/action/${id}`)));
        return results.every((result) => result.status === 200) ? results.map((result) => result.json) : undefined;
      },
      60_000,
      'every async action to complete',
    );
    expect(outputs).toEqual(ids.map((_, n) => ({ n, waited: 1500 + n })));
    // Every action's upstream call made once (a run is finished or handed back unstarted, never
    // cut short and run again), and one async_action webhook per action at the receiver.
    const slowPaths = slowCalls().map((request) => request.path).sort();
    expect(slowPaths).toEqual(ids.map((_, n) => `/slow/${1500 + n}`).sort());
    await receiver.waitFor((item) => item.json.type === 'async_action' && ids.includes(item.json.id as string), ids.length, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 500)); // room for a duplicate to show up
    const delivered = receiver.received.filter((item) => item.json.type === 'async_action' && ids.includes(item.json.id as string));
    expect(delivered.map((item) => item.json.id).sort()).toEqual([...ids].sort());
  }, 120_000);

  it('an action-runner given SIGTERM during a synchronous action that outlasts its shutdown timeout answers 503 before it, and exits 0', async () => {
    const live = stack.services.filter((proc) => proc.service === 'action-runner' && proc.child.exitCode === null);
    // 20 s of upstream wait: past SHUTDOWN_TIMEOUT_MS (15 s), within FUNCTION_TIMEOUT_MS.
    const pending = fetch(`${stack.url}/action/trigger`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'api' },
      body: JSON.stringify({ action_name: 'slow-echo', input: { n: 99, ms: 20_000 } }),
    }).then(async (response) => ({ status: response.status, json: (await response.json()) as { error?: { code?: string } }, at: Date.now() }));
    await eventually(async () => (upstream.requests.some((request) => request.path === '/slow/20000') ? true : undefined), 20_000, 'the action to call its upstream');
    const signalledAt = Date.now();
    const exits = live.map(exitOf);
    for (const proc of live) proc.child.kill('SIGTERM');
    const answer = await pending;
    expect({ status: answer.status, code: answer.json.error?.code }).toEqual({ status: 503, code: 'service_unavailable' });
    // Answered within the shutdown timeout, and every replica exited 0 (not cut off at the deadline).
    expect(answer.at - signalledAt).toBeLessThan(15_000);
    expect(await Promise.all(exits)).toEqual(live.map(() => 0));
    // One back, for the gateway's readiness (it pings every service).
    await stack.restart('action-runner');
  }, 90_000);

  it('the gateway given SIGTERM answers /ready 503 while still serving, then closes its port; a call in flight is answered', async () => {
    const gateway = stack.gateways[0]!;
    expect((await fetch(`${gateway.url}/ready`)).status).toBe(200);
    const slow = call('/slow/2500');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exited = exitOf(gateway);
    const signalledAt = Date.now();
    gateway.child.kill('SIGTERM');
    // Poll until the port refuses: every answer after the signal is a 503 on /ready, and a
    // non-probe request is still served while /ready says 503.
    const seen: Array<{ at: number; ready: number | 'refused'; health?: number }> = [];
    for (;;) {
      const at = Date.now() - signalledAt;
      try {
        const ready = await fetch(`${gateway.url}/ready`, { headers: { connection: 'close' } });
        await ready.text();
        const health = await fetch(`${gateway.url}/health`, { headers: { connection: 'close' } });
        await health.text();
        seen.push({ at, ready: ready.status, health: health.status });
      } catch {
        seen.push({ at, ready: 'refused' });
        break;
      }
      if (at > 20_000) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const answered = seen.filter((item) => item.ready !== 'refused');
    expect(seen.at(-1)!.ready).toBe('refused');
    // Allow one 200 from a probe that crossed the signal.
    expect(answered.slice(1).every((item) => item.ready === 503 && item.health === 200)).toBe(true);
    expect(answered.filter((item) => item.ready === 503).length).toBeGreaterThan(2);
    expect(seen.at(-1)!.at).toBeGreaterThanOrEqual(READY_DELAY_MS - 200);
    expect((await slow).status).toBe(200);
    expect(await exited).toBe(0);
  }, 60_000);
});
