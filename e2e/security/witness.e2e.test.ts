import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from '../support/providers.js';
import { http } from '../support/stack.js';
import { startSecurityStack, type SecurityStack } from './support/canaries.js';

/**
 * The witness every security test relies on: first that it can fail (a canary published where
 * secrets may not travel is caught), then the everyday paths of a connection holding a canary
 * credential leave it nowhere but where the API promises it.
 */
let security: SecurityStack;
let upstream: TestUpstreamApi;
let credential: string;
let readOnlyKey: string;

beforeAll(async () => {
  upstream = await startUpstreamApi();
  security = await startSecurityStack({
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
  });
  const { stack } = security;
  credential = security.canary('API key of the witnessed connection');
  await seedApiKeyConnection(stack, 'witnessed', 'conn-1', credential);
  const created = await http(`${stack.url}/admin/environments/dev/api-keys`, {
    method: 'POST',
    token: stack.adminToken,
    body: { display_name: 'read only', scopes: ['environment:connections:read', 'environment:connections:list', 'environment:proxy'] },
  });
  readOnlyKey = created.json.data.secret;
}, 120_000);

afterAll(async () => {
  await security?.dispose();
  await upstream?.close();
});

describe('the canary witness', () => {
  it('catches a canary on a subject where no secret may travel', async () => {
    const { stack } = security;
    const probe = security.canary('probe');
    const nc = await stack.connectNats();
    nc.publish('events.witness.probe', `leaked ${probe}`);
    await nc.flush();
    await nc.close();
    for (let i = 0; i < 50 && !security.leaks().some((leak) => leak.canary.startsWith('probe')); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(security.leaks().filter((leak) => leak.canary.startsWith('probe'))).toEqual([{ canary: `probe (${probe})`, where: 'nats events.witness.probe' }]);
    expect(() => security.assertClean(`x${probe}x`, 'the text')).toThrow('the text holds the canary of probe');
  });

  it('finds the credential only where the API promises it, and the environment canary nowhere', async () => {
    const { stack } = security;
    const answers: string[] = [];
    const read = await fetch(`${stack.url}/connections/conn-1?provider_config_key=witnessed`, { headers: { authorization: `Bearer ${readOnlyKey}` } });
    expect(read.status).toBe(200);
    answers.push(await read.text());
    const list = await fetch(`${stack.url}/connections`, { headers: { authorization: `Bearer ${readOnlyKey}` } });
    expect(list.status).toBe(200);
    answers.push(await list.text());
    const proxied = await fetch(`${stack.url}/proxy/status/200`, {
      headers: { authorization: `Bearer ${readOnlyKey}`, 'connection-id': 'conn-1', 'provider-config-key': 'witnessed' },
    });
    expect(proxied.status).toBe(200);
    answers.push(await proxied.text());
    // The credential did reach the provider, injected by the proxy...
    expect(upstream.requests.some((request) => request.headers['x-api-key'] === credential)).toBe(true);
    // ...and nothing else: not the answers of a key without a credentials scope, not a log line,
    // not a NATS message outside the subjects that carry secrets by design.
    for (const [index, answer] of answers.entries()) security.assertClean(answer, `answer ${index}`);
    expect(security.leaks().filter((leak) => !leak.canary.startsWith('probe'))).toEqual([]);
  });
});
