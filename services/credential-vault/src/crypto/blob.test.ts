import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { DecryptionError, open, seal } from './aead.js';
import { credentialAad, formatBlob, parseBlob } from './blob.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

describe('credential blobs', () => {
  it('format as lk1.<version>.<iv>.<tag>.<ciphertext> and parse back', () => {
    const key = randomBytes(32);
    const aad = credentialAad('env_a', 3, { connectionId: 'conn_1', field: 'access_token' });
    const blob = formatBlob(3, seal(key, Buffer.from('token'), aad));
    expect(blob).toMatch(/^lk1\.3\.[\w-]{16}\.[\w-]{22}\.[\w-]+$/);
    const parsed = parseBlob(blob);
    expect(parsed.dataKeyVersion).toBe(3);
    expect(open(key, parsed.sealed, aad).toString()).toBe('token');
    const empty = parseBlob(formatBlob(1, seal(key, Buffer.alloc(0), aad)));
    expect(open(key, empty.sealed, aad)).toHaveLength(0);
  });

  it('accept only the canonical base64url spelling, so no edit to the string goes unnoticed', () => {
    const blob = formatBlob(1, seal(randomBytes(32), Buffer.from('x'), Buffer.alloc(0)));
    // A 16-byte tag is 22 characters with 4 spare bits in the last one; setting them decodes alike.
    const tag = blob.split('.')[3] ?? '';
    const last = ALPHABET.indexOf(tag.slice(-1));
    const respelled = `${tag.slice(0, -1)}${ALPHABET[last | 0b1111]}`;
    expect(Buffer.from(respelled, 'base64url')).toEqual(Buffer.from(tag, 'base64url'));
    expect(() => parseBlob(blob.replace(tag, respelled))).toThrow(DecryptionError);
  });

  it('reject anything else', () => {
    const good = formatBlob(1, seal(randomBytes(32), Buffer.from('x'), Buffer.alloc(0)));
    const [, , iv, tag, ct] = good.split('.');
    for (const bad of ['', 'plain text', `lk2.1.${iv}.${tag}.${ct}`, `lk1.0.${iv}.${tag}.${ct}`, `lk1.x.${iv}.${tag}.${ct}`,
      `lk1.1.${iv}.${tag}`, `lk1.1.${iv}.${tag}.${ct}.extra`, `lk1.1.AAAA.${tag}.${ct}`, `lk1.1.${iv}.${tag}.a+b/`]) {
      expect(() => parseBlob(bad)).toThrow(DecryptionError);
    }
  });

  it('bind environment, version, connection, integration and field unambiguously', () => {
    const base = { connectionId: 'c', integrationId: 'i', field: 'f' };
    const variants = [
      credentialAad('env', 1, base),
      credentialAad('env2', 1, base),
      credentialAad('env', 2, base),
      credentialAad('env', 1, { ...base, connectionId: 'd' }),
      credentialAad('env', 1, { integrationId: 'i', field: 'f' }),
      credentialAad('env', 1, { connectionId: '', integrationId: 'i', field: 'f' }),
      credentialAad('env', 1, { connectionId: 'i', field: 'f' }),
      credentialAad('env', 1, { ...base, field: 'g' }),
    ].map((aad) => aad.toString('hex'));
    expect(new Set(variants).size).toBe(variants.length);
  });
});
