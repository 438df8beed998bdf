import { describe, expect, it } from '@jest/globals';
import type { Scope } from '@latchkey/contracts';
import { CTX_SCOPES, ENVIRONMENT_GRANTS, guardHost, recordWriteTimeoutMs } from './host.js';

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
