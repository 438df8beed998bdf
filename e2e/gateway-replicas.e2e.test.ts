import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ gateways: 2, env: { RATE_LIMIT_PER_MINUTE: '50' } });
}, 60_000);

afterAll(async () => {
  await stack?.dispose();
});

async function newKey(environment: string) {
  const created = await http(`${stack.url}/admin/environments/${environment}/api-keys`, {
    method: 'POST',
    token: stack.adminToken,
    body: { display_name: 'replica test', scopes: ['environment:variables:read'] },
  });
  expect(created.status).toBe(201);
  return created.json.data as { id: string; secret: string };
}

describe('two gateway replicas', () => {
  it('share one rate-limit budget: 100 alternating requests give exactly 50 × 200 and 50 × 429', async () => {
    await http(`${stack.url}/admin/environments`, { method: 'POST', token: stack.adminToken, body: { name: 'limited', account: 'limited' } });
    const key = await newKey('limited');
    // The budget is per clock minute: requests that straddled one would get a second budget (the
    // slower a loaded machine runs them, the likelier). Late in a minute, wait for the next.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 200));
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 100; i++) {
      const response = await http(`${stack.gateways[i % 2]!.url}/environment-variables`, { token: key.secret });
      statuses.push(response.status);
      if (response.status === 429) {
        retryAfter = response.headers.get('retry-after');
        expect(response.json.error.code).toBe('too_many_requests');
      }
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(50);
    expect(statuses.filter((status) => status === 429)).toHaveLength(50);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
  }, 60_000);

  // The docs' "within a second" holds on a machine at rest; a loaded one can spend that on the
  // DELETE alone. 5 s still tells the broadcast from the cache, which keeps a key five minutes.
  it('both refuse a key within seconds of its revocation on one of them', async () => {
    await http(`${stack.url}/admin/environments`, { method: 'POST', token: stack.adminToken, body: { name: 'revoking', account: 'revoking' } });
    const key = await newKey('revoking');
    const [first, second] = stack.gateways;
    // Both replicas now hold the key in memory.
    expect((await http(`${first!.url}/environment-variables`, { token: key.secret })).status).toBe(200);
    expect((await http(`${second!.url}/environment-variables`, { token: key.secret })).status).toBe(200);

    const revokedAt = Date.now();
    expect((await http(`${first!.url}/admin/environments/revoking/api-keys/${key.id}`, { method: 'DELETE', token: stack.adminToken })).status).toBe(200);
    let refusedAt: number | undefined;
    while (Date.now() - revokedAt < 5_000) {
      const response = await http(`${second!.url}/environment-variables`, { token: key.secret });
      if (response.status === 401) {
        expect(response.json.error.code).toBe('unknown_api_key');
        refusedAt = Date.now();
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(refusedAt).toBeDefined();
    expect(refusedAt! - revokedAt).toBeLessThan(5_000);
    expect((await http(`${first!.url}/environment-variables`, { token: key.secret })).status).toBe(401);
  });

  // As above: 5 s, not the docs' second, still tells the broadcast from the cache's minute.
  it('both answer with an environment\'s new settings within seconds of a change on one of them', async () => {
    await http(`${stack.url}/admin/environments`, { method: 'POST', token: stack.adminToken, body: { name: 'changing', account: 'changing' } });
    const key = await newKey('changing');
    const [first, second] = stack.gateways;
    const variablesOn = async (gateway: typeof first) => (await http(`${gateway!.url}/environment-variables`, { token: key.secret })).json;
    // Both replicas now hold the environment in memory.
    expect(await variablesOn(first)).toEqual([]);
    expect(await variablesOn(second)).toEqual([]);

    const patch = { variables: [{ name: 'REGION', value: 'eu-west-1' }] };
    const changedAt = Date.now();
    expect((await http(`${first!.url}/admin/environments/changing`, { method: 'PATCH', token: stack.adminToken, body: patch })).status).toBe(200);
    expect(await variablesOn(first)).toEqual(patch.variables);
    let seenAt: number | undefined;
    while (Date.now() - changedAt < 5_000) {
      if (JSON.stringify(await variablesOn(second)) === JSON.stringify(patch.variables)) {
        seenAt = Date.now();
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seenAt).toBeDefined();
  });
});
