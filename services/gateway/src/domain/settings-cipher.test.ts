import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { DecryptionError } from '@latchkey/crypto';
import { createSettingsCipher, variableField } from './settings-cipher.js';

const v1 = { version: 'v1', key: randomBytes(32) };
const v2 = { version: 'v2', key: randomBytes(32) };

describe('settings cipher', () => {
  it('seals under the newest key, with no plaintext in the blob, and opens only for the same environment and field', () => {
    const cipher = createSettingsCipher([v1, v2]);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const blob = cipher.seal('env_a', 'signing_key/x', secret);
    expect(blob).toMatch(/^lk1\.2\./);
    expect(blob).not.toContain(secret);
    expect(cipher.open('env_a', 'signing_key/x', blob)).toBe(secret);
    expect(() => cipher.open('env_b', 'signing_key/x', blob)).toThrow(DecryptionError);
    expect(() => cipher.open('env_a', variableField('x'), blob)).toThrow(DecryptionError);
    expect(() => cipher.open('env_a', 'signing_key/x', secret)).toThrow(DecryptionError);
    expect(cipher.isCurrent(blob)).toBe(true);
  });
  it('opens what an older key sealed while that key is configured, and says it needs resealing', () => {
    const old = createSettingsCipher([v1]).seal('env_a', 'variable/A', 'value');
    const cipher = createSettingsCipher([v1, v2]);
    expect(cipher.open('env_a', 'variable/A', old)).toBe('value');
    expect(cipher.isCurrent(old)).toBe(false);
    expect(() => createSettingsCipher([v2]).open('env_a', 'variable/A', old)).toThrow(DecryptionError);
  });
  it('seals under the version it is told to while newer keys only open (the first step of a rotation across replicas)', () => {
    const rolling = createSettingsCipher([v1, v2], { sealingVersion: 'v1' });
    const blob = rolling.seal('env_a', 'variable/A', 'value');
    expect(blob).toMatch(/^lk1\.1\./);
    // A replica not restarted yet, which knows v1 only, opens it.
    expect(createSettingsCipher([v1]).open('env_a', 'variable/A', blob)).toBe('value');
    expect(rolling.isCurrent(blob)).toBe(true);
    // What a replica sealing with v2 already wrote opens too, and is resealed under v1 (a step back).
    const newer = createSettingsCipher([v1, v2], { sealingVersion: 'v2' }).seal('env_a', 'variable/A', 'value');
    expect(newer).toMatch(/^lk1\.2\./);
    expect(rolling.open('env_a', 'variable/A', newer)).toBe('value');
    expect(rolling.isCurrent(newer)).toBe(false);
  });
  it('refuses a sealing version that is not among the keys', () => {
    expect(() => createSettingsCipher([v1], { sealingVersion: 'v2' })).toThrow(/v2/);
  });
});
