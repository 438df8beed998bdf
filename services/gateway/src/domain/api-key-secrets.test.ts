import { describe, expect, it } from '@jest/globals';
import { API_KEY_PREFIX, digestApiKey, generateApiKeySecret, hintOf, safeEqual } from './api-key-secrets.js';

describe('API key secrets', () => {
  it('carry the prefix and 256 bits of randomness', () => {
    const secret = generateApiKeySecret();
    expect(secret.startsWith(API_KEY_PREFIX)).toBe(true);
    expect(Buffer.from(secret.slice(API_KEY_PREFIX.length), 'base64url')).toHaveLength(32);
    expect(generateApiKeySecret()).not.toBe(secret);
  });

  it('are stored as a digest that depends on the digest secret', () => {
    const secret = generateApiKeySecret();
    expect(digestApiKey(secret, 'a'.repeat(32))).toBe(digestApiKey(secret, 'a'.repeat(32)));
    expect(digestApiKey(secret, 'a'.repeat(32))).not.toBe(digestApiKey(secret, 'b'.repeat(32)));
    expect(digestApiKey(secret, 'a'.repeat(32))).not.toContain(secret.slice(6, 20));
  });

  it('show only a short hint', () => {
    const secret = generateApiKeySecret();
    expect(hintOf(secret).length).toBeLessThan(12);
  });

  it('compare in constant time, any lengths', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abcd')).toBe(false);
  });
});
