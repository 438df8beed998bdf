import { describe, expect, it } from '@jest/globals';
import type { Scope } from '@latchkey/contracts';
import { CTX_SCOPES, ENVIRONMENT_GRANTS, endpointAndParams, guardHost, messageSizedParts, proxyAnswer, recordWriteTimeoutMs } from './host.js';

/** Host methods that answer their own name: what the guard lets through is what they say. */
const methods = Object.fromEntries(Object.keys(CTX_SCOPES).map((name) => [name, async () => name])) as Parameters<typeof guardHost>[0];

describe('guardHost', () => {
  it('lets a dry run call only what its key\'s scopes cover, and notes what it refused', async () => {
    const grants = { kind: 'api_key' as const, scopes: new Set<Scope>(['environment:proxy', 'environment:connections:read']), refused: [] as Scope[] };
    const host = guardHost(methods, grants);
    expect(await host['proxy']!()).toBe('proxy');
    expect(await host['getConnection']!()).toBe('getConnection');
    expect(await host['batchSave']!()).toBe('batchSave'); // recorded, not applied, in a dry run
    await expect(host['getEnvironmentVariables']!()).rejects.toMatchObject({ code: 'forbidden' });
    await expect(host['getIntegration']!()).rejects.toMatchObject({ code: 'forbidden' });
    expect(grants.refused).toEqual(['environment:variables:read', 'environment:integrations:read']);
  });

  it('lets a deployed function (acting for the environment) call every method', async () => {
    const host = guardHost(methods, ENVIRONMENT_GRANTS);
    for (const name of Object.keys(CTX_SCOPES)) expect(await host[name]!()).toBe(name);
  });

  it('offers nothing that has no entry in CTX_SCOPES', () => {
    const host = guardHost({ ...methods, readFile: async () => 'secret' } as Parameters<typeof guardHost>[0], ENVIRONMENT_GRANTS);
    expect(Object.keys(host).sort()).toEqual(Object.keys(CTX_SCOPES).sort());
  });
});

describe('recordWriteTimeoutMs', () => {
  it('waits for a small batch seconds, not minutes: a write lost with a NATS node holds its sync run no longer', () => {
    expect(recordWriteTimeoutMs(25)).toBeLessThanOrEqual(15_000);
    expect(recordWriteTimeoutMs(1)).toBeGreaterThanOrEqual(10_000);
  });

  it('gives the largest batch (10,000 records) the two minutes a slow database may take', () => {
    expect(recordWriteTimeoutMs(10_000)).toBe(120_000);
    expect(recordWriteTimeoutMs(5_000)).toBeLessThan(120_000);
  });
});

describe('messageSizedParts', () => {
  const record = (id: number, bytes: number) => ({ id: `r-${id}`, pad: 'x'.repeat(bytes) });

  it('cuts a batch into consecutive parts that each fit the budget, in order', () => {
    const batch = Array.from({ length: 10 }, (_, id) => record(id, 100));
    const size = JSON.stringify(batch[0]).length + 1;
    const { parts, tooLarge } = messageSizedParts(batch, size * 3 + 1);
    expect(tooLarge).toEqual([]);
    expect(parts.map((part) => part.start)).toEqual([0, 3, 6, 9]);
    expect(parts.flatMap((part) => part.records)).toEqual(batch);
    for (const part of parts) expect(Buffer.byteLength(JSON.stringify(part.records))).toBeLessThanOrEqual(size * 3 + 1);
  });

  it('leaves out a record larger than the budget alone, and keeps each part consecutive', () => {
    const batch = [record(0, 10), record(1, 10), record(2, 5000), record(3, 10)];
    const { parts, tooLarge } = messageSizedParts(batch, 1000);
    expect(tooLarge).toEqual([2]);
    expect(parts).toEqual([
      { start: 0, records: [batch[0], batch[1]] },
      { start: 3, records: [batch[3]] },
    ]);
  });
});

describe('endpointAndParams', () => {
  it('keeps the endpoint\'s own query beside params, as written, params winning on a name both give', () => {
    expect(endpointAndParams('/tickets?status=open&q=a%20b&flag', { cursor: 'c2', limit: 50 })).toEqual({ path: '/tickets', query: 'status=open&q=a%20b&flag&cursor=c2&limit=50' });
    expect(endpointAndParams('/tickets?cursor=c1&status=open', { cursor: 'c2' })).toEqual({ path: '/tickets', query: 'status=open&cursor=c2' });
    expect(endpointAndParams('/tickets?status=open', undefined)).toEqual({ path: '/tickets', query: 'status=open' });
    expect(endpointAndParams('/tickets', { page: 2 })).toEqual({ path: '/tickets', query: 'page=2' });
  });
});

describe('proxyAnswer', () => {
  it('hands a JSON answer to the isolate as its text, to be parsed there under the run\'s memory limit, never parsed in the runner', () => {
    const text = JSON.stringify({ items: Array.from({ length: 1000 }, (_, id) => ({ id })) });
    const answer = proxyAnswer(200, [['Content-Type', 'application/json']], Buffer.from(text), 'json');
    expect(answer).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, data: text, parse: true });
    expect(typeof answer.data).toBe('string');
  });

  it('leaves a text answer unmarked, and joins a repeated header as one value', () => {
    const answer = proxyAnswer(404, [['Set-Cookie', 'a=1'], ['set-cookie', 'b=2']], Buffer.from('not found'), 'text');
    expect(answer).toEqual({ status: 404, headers: { 'set-cookie': 'a=1, b=2' }, data: 'not found' });
  });
});
