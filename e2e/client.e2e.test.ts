import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Latchkey, LatchkeyError } from '@latchkey/client';
import { repoRoot } from '@latchkey/testing';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

describe('the TypeScript client', () => {
  it('reads environment variables with the key it was given', async () => {
    await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { variables: [{ name: 'A', value: '1' }] } });
    const latchkey = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
    expect(await latchkey.getEnvironmentVariables()).toEqual([{ name: 'A', value: '1' }]);
  });

  it('accepts the deprecated secretKey alias', async () => {
    const latchkey = new Latchkey({ host: stack.url, secretKey: stack.bootstrapKey });
    expect(await latchkey.getEnvironmentVariables()).toHaveLength(1);
  });

  it('rejects with LatchkeyError carrying status and code', async () => {
    const latchkey = new Latchkey({ host: stack.url, apiKey: 'lk_sk_unknown' });
    const error = await latchkey.getEnvironmentVariables().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LatchkeyError);
    expect(error).toMatchObject({ status: 401, code: 'unknown_api_key' });

    const created = await http(`${stack.url}/admin/environments/dev/api-keys`, {
      method: 'POST',
      token: stack.adminToken,
      body: { display_name: 'no scope', scopes: ['environment:proxy'] },
    });
    const limited = new Latchkey({ host: stack.url, apiKey: created.json.data.secret });
    await expect(limited.getEnvironmentVariables()).rejects.toMatchObject({ status: 403, code: 'forbidden' });
  });

  it('reports an unreachable host as a network error', async () => {
    const latchkey = new Latchkey({ host: 'http://127.0.0.1:9', apiKey: 'x', timeoutMs: 2000 });
    await expect(latchkey.getEnvironmentVariables()).rejects.toMatchObject({ status: 0, code: 'ECONNREFUSED' });
  });
});

/**
 * The README's core flow, as a reader copies it: the integration and the connection its curl
 * block creates are taken as written, and its client example imports the same credentials.
 */
describe("the README's core flow", () => {
  const readme = readFileSync(join(repoRoot(), 'README.md'), 'utf8');
  /** The JSON body of the README's curl call to `route`. */
  const curlBody = (route: string) => {
    const match = new RegExp(`-d '(\\{[^']*\\})' \\$URL/${route}\\b`).exec(readme);
    if (!match) throw new Error(`the README has no curl call to /${route}`);
    return JSON.parse(match[1]!) as Record<string, any>;
  };

  it('creates its integration and imports its connection as written', async () => {
    const integration = await http(`${stack.url}/integrations`, { method: 'POST', token: stack.bootstrapKey, body: curlBody('integrations') });
    expect(integration.status).toBe(201);
    const connection = curlBody('connections');
    const imported = await http(`${stack.url}/connections`, { method: 'POST', token: stack.bootstrapKey, body: connection });
    expect(imported.status).toBe(201);
    const read = await http(`${stack.url}/connections/${connection['connection_id']}?provider_config_key=${connection['provider_config_key']}`, { token: stack.bootstrapKey });
    expect(read.status).toBe(200);
    expect(read.json.credentials.type).toBe(connection['credentials']['type']);

    // The client example imports the same type of credentials.
    const example = /createConnection\(\{[^\n]*credentials: \{ type: '([A-Z0-9_]+)'/.exec(readme);
    expect(example?.[1]).toBe(connection['credentials']['type']);
  });
});
