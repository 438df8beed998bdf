import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** AES-256-GCM: 32-byte keys, 96-bit IVs (the size GCM is built for), full 128-bit tags. */
export const KEY_BYTES = 32;
export const IV_BYTES = 12;
export const TAG_BYTES = 16;

export interface Sealed {
  iv: Buffer;
  tag: Buffer;
  ciphertext: Buffer;
}

/**
 * Thrown whenever a ciphertext does not verify: wrong key, wrong additional data, or tampering.
 * GCM cannot tell these apart, and the message never carries key material or plaintext.
 */
export class DecryptionError extends Error {
  override readonly name = 'DecryptionError';
}

/**
 * Encrypts under `key`, binding `aad`. The IV is random per call: with 96-bit random IVs a
 * key stays safe for far more messages than one environment's credentials will ever need.
 */
export function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Sealed {
  assertKey(key);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, tag: cipher.getAuthTag(), ciphertext };
}

/** Decrypts and verifies; throws DecryptionError unless key, aad, iv, tag and ciphertext all match. */
export function open(key: Buffer, sealed: Sealed, aad: Buffer): Buffer {
  assertKey(key);
  // Fixed lengths: GCM would otherwise accept a truncated tag, which weakens forgery resistance.
  if (sealed.iv.length !== IV_BYTES || sealed.tag.length !== TAG_BYTES) {
    throw new DecryptionError('ciphertext is malformed');
  }
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.tag);
  try {
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]);
  } catch {
    throw new DecryptionError('ciphertext failed authentication');
  }
}

function assertKey(key: Buffer): void {
  if (key.length !== KEY_BYTES) throw new Error(`AES-256-GCM needs a ${KEY_BYTES}-byte key`);
}
