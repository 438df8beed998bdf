import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { algorithmForKey } from './fresh-credentials.js';

const pkcs8 = (key: KeyObject) => key.export({ type: 'pkcs8', format: 'pem' }).toString();

describe('algorithmForKey', () => {
  it('signs RSA keys RS256 and EC keys by their curve, in PKCS#8 or SEC1 form', () => {
    expect(algorithmForKey(pkcs8(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey))).toBe('RS256');
    // App Store Connect's .p8 keys: PKCS#8 P-256, "BEGIN PRIVATE KEY".
    expect(algorithmForKey(pkcs8(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey))).toBe('ES256');
    expect(algorithmForKey(pkcs8(generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey))).toBe('ES384');
    const sec1 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'sec1', format: 'pem' }).toString();
    expect(sec1).toContain('BEGIN EC PRIVATE KEY');
    expect(algorithmForKey(sec1)).toBe('ES256');
  });

  it('refuses what is not an RSA or EC private key', () => {
    expect(algorithmForKey('not a key')).toBeUndefined();
    expect(algorithmForKey(pkcs8(generateKeyPairSync('ed25519').privateKey))).toBeUndefined();
  });
});
