import { randomBytes } from 'node:crypto';
import { DecryptionError, IV_BYTES, KEY_BYTES, TAG_BYTES, open, seal } from './aead.js';

/** A key-encryption key from configuration (`ENCRYPTION_KEYS`). It only ever wraps data keys. */
export interface Kek {
  version: string;
  key: Buffer;
}

export interface KekSet {
  /** The highest version: wraps every new data key and is the target of rotation. */
  newest: Kek;
  get(version: string): Kek | undefined;
  versions: string[];
}

/** Orders `v1 < v2 < v10` numerically; rejects what config would reject, in case it is bypassed. */
export function createKekSet(keks: readonly Kek[]): KekSet {
  const byVersion = new Map<string, Kek>();
  for (const kek of keks) {
    if (!/^v\d+$/.test(kek.version)) throw new Error(`KEK version "${kek.version}" must look like v1, v2, ...`);
    if (kek.key.length !== KEY_BYTES) throw new Error(`KEK ${kek.version} must be ${KEY_BYTES} bytes`);
    if (byVersion.has(kek.version)) throw new Error(`KEK ${kek.version} is listed twice`);
    byVersion.set(kek.version, kek);
  }
  const sorted = [...byVersion.values()].sort((a, b) => versionNumber(a) - versionNumber(b));
  const newest = sorted.at(-1);
  if (!newest) throw new Error('at least one KEK is required');
  return { newest, get: (version) => byVersion.get(version), versions: sorted.map((kek) => kek.version) };
}

const versionNumber = (kek: Kek): number => Number(kek.version.slice(1));

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
