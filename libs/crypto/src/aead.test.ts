import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { DecryptionError, open, seal } from './aead.js';

const key = randomBytes(32);
const aad = Buffer.from('context');
const plaintext = Buffer.from('a secret');

describe('AES-256-GCM seal/open', () => {
  it('round-trips and uses a fresh IV each time', () => {
    const first = seal(key, plaintext, aad);
    const second = seal(key, plaintext, aad);
    expect(open(key, first, aad)).toEqual(plaintext);
    expect(first.iv.equals(second.iv)).toBe(false);
    expect(first.ciphertext.equals(second.ciphertext)).toBe(false);
    expect(first.ciphertext.includes(plaintext)).toBe(false);
  });

  it('rejects another key, other additional data, and any flipped bit', () => {
    const sealed = seal(key, plaintext, aad);
    const flip = (buffer: Buffer) => Buffer.from(buffer.map((byte, index) => (index === 0 ? byte ^ 1 : byte)));
    expect(() => open(randomBytes(32), sealed, aad)).toThrow(DecryptionError);
    expect(() => open(key, sealed, Buffer.from('other'))).toThrow(DecryptionError);
    expect(() => open(key, { ...sealed, ciphertext: flip(sealed.ciphertext) }, aad)).toThrow(DecryptionError);
    expect(() => open(key, { ...sealed, tag: flip(sealed.tag) }, aad)).toThrow(DecryptionError);
    expect(() => open(key, { ...sealed, iv: flip(sealed.iv) }, aad)).toThrow(DecryptionError);
  });

  it('refuses truncated tags and wrong-sized keys', () => {
    const sealed = seal(key, plaintext, aad);
    expect(() => open(key, { ...sealed, tag: sealed.tag.subarray(0, 4) }, aad)).toThrow(DecryptionError);
    expect(() => seal(randomBytes(16), plaintext, aad)).toThrow(/32-byte key/);
  });
});
