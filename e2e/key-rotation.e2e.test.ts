import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { http, startStack, type Stack } from './support/stack.js';

const v1 = `v1:${randomBytes(32).toString('base64')}`;
const v2 = `v2:${randomBytes(32).toString('base64')}`;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { 'credential-vault': { ENCRYPTION_KEYS: v1 } } });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

const api = (method: string, path: string, body?: unknown) =>
  http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

describe('encryption key rotation', () => {
  it('survives adding a key version, rotating, removing the old version and restarting', async () => {
    const provider = (await api('GET', '/providers')).json.data.find((entry: { auth_mode: string }) => entry.auth_mode === 'API_KEY');
    expect((await api('POST', '/integrations', { provider: provider.name, unique_key: 'rotating', credentials: { client_secret: 'integration-secret' } })).status).toBe(201);
    const webhookSecret = (await api('GET', '/integrations/rotating?include=webhook')).json.data.webhookSecret;
    for (const id of ['a', 'b', 'c']) {
      const created = await api('POST', '/connections', { provider_config_key: 'rotating', connection_id: id, credentials: { type: 'API_KEY', apiKey: `key-${id}` } });
      expect(created.status).toBe(201);
    }

    await stack.restart('credential-vault', { ENCRYPTION_KEYS: `${v1},${v2}` });
    const rotated = await http(`${stack.url}/admin/encryption/rotate`, { method: 'POST', token: stack.adminToken, body: { data_keys: true } });
    expect(rotated.status).toBe(200);
    expect(rotated.json.data).toMatchObject({ failed: [], reencrypted: 5 });
    expect(rotated.json.data.rewrapped).toBeGreaterThanOrEqual(1);

    await stack.restart('credential-vault', { ENCRYPTION_KEYS: v2 });
    for (const id of ['a', 'b', 'c']) {
      const read = await api('GET', `/connections/${id}?provider_config_key=rotating`);
      expect(read.status).toBe(200);
      expect(read.json.credentials).toEqual({ type: 'API_KEY', apiKey: `key-${id}` });
    }
    const integration = (await api('GET', '/integrations/rotating?include=webhook,credentials')).json.data;
    expect(integration.credentials).toEqual({ client_secret: 'integration-secret' });
    expect(integration.webhookSecret).toBe(webhookSecret);
  }, 60_000);
});
