import { describe, expect, it } from '@jest/globals';
import { createFunctionCache } from './function-cache.js';
import { createKnownConnections } from './known-connections.js';

const fn = (version: number) => ({ version, description: { type: 'action' as const, name: 'a', has_input_schema: false }, bundle: 'x' });

describe('function cache', () => {
  it('serves until a deploy drops the integration, and never stores a fetch that began before the drop', () => {
    let now = 0;
    const cache = createFunctionCache({ ttlMs: 1000, maxEntries: 10, maxBytes: 1024 * 1024, now: () => now });
    const before = cache.generation('env', 'crm');
    cache.set('env', 'crm', 'action', 'a', fn(1), before);
    expect(cache.get('env', 'crm', 'action', 'a')?.version).toBe(1);
    const racing = cache.generation('env', 'crm');
    cache.invalidate('env', 'crm');
    expect(cache.get('env', 'crm', 'action', 'a')).toBeUndefined();
    cache.set('env', 'crm', 'action', 'a', fn(1), racing);
    expect(cache.get('env', 'crm', 'action', 'a')).toBeUndefined();
    cache.set('env', 'crm', 'action', 'a', fn(2), cache.generation('env', 'crm'));
    expect(cache.get('env', 'crm', 'action', 'a')?.version).toBe(2);
    now = 1000;
    expect(cache.get('env', 'crm', 'action', 'a')).toBeUndefined();
  });

  it('keeps other integrations when one is dropped, and forgets all on clear', () => {
    const cache = createFunctionCache({ ttlMs: 1000, maxEntries: 10, maxBytes: 1024 * 1024 });
    cache.set('env', 'crm', 'action', 'a', fn(1), cache.generation('env', 'crm'));
    cache.set('env', 'erp', 'action', 'a', fn(1), cache.generation('env', 'erp'));
    cache.invalidate('env', 'crm');
    expect(cache.get('env', 'erp', 'action', 'a')).toBeDefined();
    const racing = cache.generation('env', 'erp');
    cache.clear();
    expect(cache.get('env', 'erp', 'action', 'a')).toBeUndefined();
    cache.set('env', 'erp', 'action', 'a', fn(1), racing);
    expect(cache.get('env', 'erp', 'action', 'a')).toBeUndefined();
  });
});

describe('function cache bounds', () => {
  it('holds bundles up to its bytes, the least recently used going first', () => {
    const cache = createFunctionCache({ ttlMs: 60_000, maxEntries: 5000, maxBytes: 3 * (700 * 1024 + 4096) });
    const large = (version: number) => ({ ...fn(version), bundle: 'x'.repeat(700 * 1024) });
    for (const name of ['a', 'b', 'c', 'd']) cache.set('env', 'crm', 'action', name, large(1), cache.generation('env', 'crm'));
    expect(['a', 'b', 'c', 'd'].map((name) => cache.get('env', 'crm', 'action', name) !== undefined)).toEqual([false, true, true, true]);
  });
});

describe('known connections', () => {
  it('remembers a connection until it is deleted or ages out', () => {
    let now = 0;
    const known = createKnownConnections({ ttlMs: 100, maxEntries: 2, now: () => now });
    known.add('env', 'crm', 'c1');
    expect(known.has('env', 'crm', 'c1')).toBe(true);
    expect(known.has('env', 'erp', 'c1')).toBe(false);
    known.forget('env', 'crm', 'c1');
    expect(known.has('env', 'crm', 'c1')).toBe(false);
    known.add('env', 'crm', 'c1');
    now = 100;
    expect(known.has('env', 'crm', 'c1')).toBe(false);
  });
});
