import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
/** What each service printed, whole: its start line names the Node it runs on. */
const printed = new Map<string, string>();

beforeAll(async () => {
  stack = await startStack({
    env: { LOG_LEVEL: 'info' },
    onOutput: (service, text) => printed.set(service, (printed.get(service) ?? '') + text),
  });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('the running stack', () => {
  it('reports every service ready through the gateway', async () => {
    const ready = await http(`${stack.url}/ready`);
    expect(ready.status).toBe(200);
    expect(ready.json.services).toEqual({
      gateway: true,
      'credential-vault': true,
      proxy: true,
      'sync-scheduler': true,
      'action-runner': true,
      'webhook-router': true,
    });
  });

  it('gives every other service its own probes', async () => {
    for (const service of stack.services) {
      const health = await http(`${service.url}/health`);
      expect(health.json).toEqual({ status: 'ok' });
      // Held open longer than a client's idle socket, so a reused connection is never closed under it.
      expect(health.headers.get('keep-alive')).toBe('timeout=65');
      expect((await http(`${service.url}/ready`)).status).toBe(200);
    }
  });

  it('runs every service on Node 24, the Node the harness runs on, and says so at start', () => {
    expect(process.versions.node.split('.')[0]).toBe('24');
    for (const service of stack.services) {
      const starting = (printed.get(service.service) ?? '')
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { message?: string; node?: string })
        .find((entry) => entry.message === 'starting');
      expect({ service: service.service, node: starting?.node }).toEqual({ service: service.service, node: process.version });
    }
  });

  it('serves the customer API with the bootstrap key', async () => {
    const admin = await http(`${stack.url}/admin/environments/dev`, {
      method: 'PATCH',
      token: stack.adminToken,
      body: { variables: [{ name: 'REGION', value: 'eu' }] },
    });
    expect(admin.status).toBe(200);
    const variables = await http(`${stack.url}/environment-variables`, { token: stack.bootstrapKey });
    expect(variables.status).toBe(200);
    expect(variables.json).toEqual([{ name: 'REGION', value: 'eu' }]);
  });

  it('shuts a service down gracefully on SIGTERM, and the gateway notices', async () => {
    const vault = stack.services.find((service) => service.service === 'credential-vault')!;
    const started = Date.now();
    expect(await vault.stop()).toBe(0);
    expect(Date.now() - started).toBeLessThan(5000);
    const ready = await http(`${stack.url}/ready`);
    expect(ready.status).toBe(503);
    expect(ready.json.services['credential-vault']).toBe(false);
  });
});
