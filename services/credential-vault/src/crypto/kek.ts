import { randomBytes } from 'node:crypto';
import { DecryptionError, IV_BYTES, KEY_BYTES, TAG_BYTES, open, seal } from './aead.js';
import type { Kek } from '@latchkey/crypto';

export { createKekSet, type Kek, type KekSet } from '@latchkey/crypto';

/** A fresh data key: 32 random bytes, only ever stored wrapped. */
export function newDataKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

/**
 * The wrap binds the environment and data-key version, so a wrapped key copied to another
 * environment's (or another version's) record no longer unwraps.
 */
function wrapAad(environmentId: string, version: number): Buffer {
  return Buffer.from(JSON.stringify(['latchkey/data-key/v1', environmentId, version]), 'utf8');
}

/** Stored form: base64 of iv | tag | ciphertext. */
export function wrapDataKey(kek: Kek, environmentId: string, version: number, dataKey: Buffer): string {
  const { iv, tag, ciphertext } = seal(kek.key, dataKey, wrapAad(environmentId, version));
  return Buffer.concat([iv, tag, ciphertext]).toString('base64');
}

export function unwrapDataKey(kek: Kek, environmentId: string, version: number, wrapped: string): Buffer {
  const bytes = Buffer.from(wrapped, 'base64');
  if (bytes.length !== IV_BYTES + TAG_BYTES + KEY_BYTES) throw new DecryptionError('wrapped data key is malformed');
  const sealed = {
    iv: bytes.subarray(0, IV_BYTES),
    tag: bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES),
    ciphertext: bytes.subarray(IV_BYTES + TAG_BYTES),
  };
  return open(kek.key, sealed, wrapAad(environmentId, version));
}
