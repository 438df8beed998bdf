import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { algorithmForKey, expiryFrom, providerError } from './fresh-credentials.js';

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

describe("a token endpoint's answer", () => {
  it('of refusal keeps at most 200 characters of its error and description: it is stored, logged and sent in an event', () => {
    const refused = providerError(400, JSON.stringify({ error: 'e'.repeat(5_000), error_description: 'd'.repeat(900_000) }));
    expect(refused.message.length).toBeLessThan(600);
    expect(refused.payload).toEqual({ status: 400, error: 'e'.repeat(200), error_description: 'd'.repeat(200) });
  });

  it('with a lifetime no date can hold has no expiry, rather than failing after the provider answered', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    expect(expiryFrom({ expires_in: 1e13 }, now)).toBeUndefined();
    expect(expiryFrom({ expires_in: 3600 }, now)).toBe('2026-12-01T01:00:00.000Z');
  });
});
