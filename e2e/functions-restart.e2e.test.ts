import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { Latchkey } from '@latchkey/client';
import { freePort, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { deployWithCli, eventually, FUNCTIONS_DIR } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

let stack: Stack;
let upstream: TestUpstreamApi;
let receiver: Receiver;
let signingKey: string;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  upstream = await startUpstreamApi();
  receiver = await startReceiver(await freePort());
  stack = await startStack({
    // Each run waits a second on the upstream; none is meant to time out (3 s was a bet on a
    // loaded machine, for runs starting on a runner just restarted).
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', FUNCTION_TIMEOUT_MS: '20000' },
    // Two runs at a time, so that most of the queue is still waiting when the runner dies.
    serviceEnv: { 'action-runner': { FUNCTION_CONCURRENCY: '2' }, 'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' } },
  });
  // The environment's webhooks go to the receiver; its signing key verifies them.
  await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { webhook_url: receiver.url } });
  const rotated = await http(`${stack.url}/admin/environments/dev/webhook-signing-key/rotate`, { method: 'POST', token: stack.adminToken });
  signingKey = rotated.json.data.signing_key as string;
  await seedApiKeyConnection(stack, 'api', 'conn-1', 'k');
  await deployWithCli(FUNCTIONS_DIR, stack);
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  await receiver?.close();
});

it('kills the action-runner with async actions queued: after a restart each completes exactly once, with one webhook each', async () => {
  const ids: string[] = [];
  for (let n = 0; n < 8; n++) {
    const response = await fetch(`${stack.url}/action/trigger`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'api', 'x-async': 'true' },
      body: JSON.stringify({ action_name: 'slow-echo', input: { n, ms: 1000 } }),
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { id: string }).id);
  }
  // Some are running: kill the runner mid-run, without a chance to finish or acknowledge.
  await eventually(async () => ((await api('GET', `/action/${ids[0]}`)).json?.status === 'running' ? true : undefined), 10_000, 'a run to start');
  const unfinished = (await Promise.all(ids.map((id) => api('GET', `/action/${id}`)))).filter((result) => result.status === 202);
  const runner = stack.services.find((proc) => proc.service === 'action-runner')!;
  const exited = new Promise((resolve) => runner.child.once('exit', resolve));
  runner.child.kill('SIGKILL');
  await exited;
  // Most were still queued or running (a run takes a second, two at a time).
  expect(unfinished.length).toBeGreaterThan(4);
  // Results live with the runner: while none runs, reading one is a retryable 503.
  expect((await api('GET', `/action/${ids[0]}`)).status).toBe(503);

  await stack.restart('action-runner');
  const outputs = await eventually(
    async () => {
      const results = await Promise.all(ids.map((id) => api('GET', `/action/${id}`)));
      return results.every((result) => result.status === 200) ? results.map((result) => result.json) : undefined;
    },
    60_000,
    'every async action to complete after the restart',
  );
  expect(outputs).toEqual(ids.map((_, n) => ({ n, waited: 1000 })));

  // One signed async_action webhook each, naming where to read the result. (That each run
  // publishes exactly one completion event is the action-runner's start-runner.int.test.ts.)
  const webhooks = await receiver.waitFor((item) => item.json.type === 'async_action', ids.length, 20_000);
  await new Promise((resolve) => setTimeout(resolve, 500)); // room for a duplicate to show up
  const delivered = receiver.received.filter((item) => item.json.type === 'async_action');
  expect(delivered).toHaveLength(ids.length);
  expect(delivered.map((item) => item.json.id).sort()).toEqual([...ids].sort());
  expect(webhooks[0]!.json).toMatchObject({
    type: 'async_action',
    connectionId: 'conn-1',
    providerConfigKey: 'api',
    actionName: 'slow-echo',
    statusUrl: `/action/${webhooks[0]!.json.id}`,
    success: true,
  });
  const verifier = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey, webhookSigningKey: signingKey });
  expect(delivered.every((item) => verifier.verifyIncomingWebhookRequest(item.body, item.headers as Record<string, string>))).toBe(true);
}, 120_000);
