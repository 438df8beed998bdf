import { describe, expect, it } from '@jest/globals';
import { SIGNING_KEY_GRACE_MS, generateSigningKey, rotateSigningKeys } from './signing-keys.js';

describe('signing keys', () => {
  it('keep the previous key for the grace period after a rotation, then drop it', () => {
    const first = generateSigningKey(new Date(0));
    const rotatedAt = new Date(1000);
    const afterRotation = rotateSigningKeys([first], rotatedAt);
    expect(afterRotation).toHaveLength(2);
    expect(afterRotation[0]?.retired_at).toBeNull();
    expect(afterRotation[1]).toMatchObject({ secret: first.secret, retired_at: rotatedAt });

    const later = rotateSigningKeys(afterRotation, new Date(1000 + SIGNING_KEY_GRACE_MS + 1));
    expect(later).toHaveLength(2);
    expect(later.map((key) => key.secret)).not.toContain(first.secret);
  });
});
