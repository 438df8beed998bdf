import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { startStack, type Stack } from './support/stack.js';

let stack: Stack;
let upstream: TestUpstreamApi;

beforeAll(async () => {
  upstream = await startUpstreamApi();
  const providersFile = writeProvidersFile(
    apiKeyProviderYaml(upstream.url),
  );
  stack = await startStack({ replicas: { proxy: 2 }, env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  await seedApiKeyConnection(stack, 'api', 'api', 'k');
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
});

const call = (path: string) =>
  fetch(`${stack.url}/proxy${path}`, {
    headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'api', 'provider-config-key': 'api' },
  }).then(async (response) => ({ status: response.status, body: await response.text() }));

describe('proxy replicas', () => {
  it('share the load and survive losing one: its in-flight calls get 503 quickly, the rest carry on', async () => {
    const [first, second] = stack.services.filter((service) => service.service === 'proxy');
    upstream.reset();
    // Both replicas take part.
    await Promise.all(Array.from({ length: 40 }, () => call('/echo')));
    expect(upstream.requests).toHaveLength(40);

    // Calls a few ms apart: each leaves the gateway in its own message, to either replica.
    const started = Date.now();
    const inFlight: Array<ReturnType<typeof call>> = [];
    for (let n = 0; n < 20; n++) {
      inFlight.push(call('/slow/1500'));
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    first!.child.kill('SIGKILL');
    const results = await Promise.all(inFlight);
    const elapsed = Date.now() - started;
    const statuses = results.map((result) => result.status);
    expect(statuses.every((status) => status === 200 || status === 503)).toBe(true);
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThan(0);
    for (const result of results.filter((item) => item.status === 503)) expect(JSON.parse(result.body).error.code).toBe('service_unavailable');
    // Given up at the hop's silence limit (3 s), not at the 30 s PROXY_TIMEOUT_MS: 15 s, since
    // 8 s left a loaded machine little room over the slow calls and that limit.
    expect(elapsed).toBeLessThan(15_000);

    // The survivor carries every later call.
    const after = await Promise.all(Array.from({ length: 20 }, () => call('/echo')));
    expect(after.every((result) => result.status === 200)).toBe(true);
    expect(second!.child.exitCode).toBeNull();
  }, 30_000);
});
