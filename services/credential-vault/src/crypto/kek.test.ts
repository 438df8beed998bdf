import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { DecryptionError } from './aead.js';
import { createKekSet, newDataKey, unwrapDataKey, wrapDataKey } from './kek.js';

const kek = (version: string) => ({ version, key: randomBytes(32) });

describe('key-encryption keys', () => {
  it('pick the numerically highest version as newest', () => {
    const set = createKekSet([kek('v2'), kek('v10'), kek('v9')]);
    expect(set.newest.version).toBe('v10');
    expect(set.versions).toEqual(['v2', 'v9', 'v10']);
    expect(set.get('v9')?.version).toBe('v9');
    expect(set.get('v1')).toBeUndefined();
  });

  it('refuse an empty list, duplicates, bad versions and short keys', () => {
    expect(() => createKekSet([])).toThrow(/at least one/);
    expect(() => createKekSet([kek('v1'), kek('v1')])).toThrow(/twice/);
    expect(() => createKekSet([kek('1')])).toThrow(/v1, v2/);
    expect(() => createKekSet([{ version: 'v1', key: randomBytes(16) }])).toThrow(/32 bytes/);
  });

  it('wrap a data key bound to its environment and version', () => {
    const wrapping = kek('v1');
    const dataKey = newDataKey();
    const wrapped = wrapDataKey(wrapping, 'env_a', 1, dataKey);
    expect(Buffer.from(wrapped, 'base64')).toHaveLength(12 + 16 + 32);
    expect(Buffer.from(wrapped, 'base64').includes(dataKey)).toBe(false);
    expect(unwrapDataKey(wrapping, 'env_a', 1, wrapped).equals(dataKey)).toBe(true);
    expect(() => unwrapDataKey(wrapping, 'env_b', 1, wrapped)).toThrow(DecryptionError);
    expect(() => unwrapDataKey(wrapping, 'env_a', 2, wrapped)).toThrow(DecryptionError);
    expect(() => unwrapDataKey(kek('v1'), 'env_a', 1, wrapped)).toThrow(DecryptionError);
    expect(() => unwrapDataKey(wrapping, 'env_a', 1, wrapped.slice(4))).toThrow(DecryptionError);
  });
});
