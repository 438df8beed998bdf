import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Latchkey, LatchkeyError } from '@latchkey/client';
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
