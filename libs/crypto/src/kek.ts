import { z } from 'zod';
import { KEY_BYTES } from './aead.js';

/** A versioned key from configuration: the vault's `ENCRYPTION_KEYS` (it only wraps data keys), the gateway's `SETTINGS_ENCRYPTION_KEYS`. */
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

/** The number of a version: `v10` → 10; blobs carry it. */
export const versionNumber = (kek: Kek): number => Number(kek.version.slice(1));

/**
 * Keys from configuration: `<version>:<base64 of 32 bytes>`, comma-separated. The highest version
 * seals new data; older versions stay to open what they sealed until rotated away.
 */
export const versionedKeys = z
  .string({ error: 'is required (secrets have no default)' })
  .transform((value, ctx) => {
    const keys = value.split(',').map((part) => part.trim()).filter(Boolean).map((part) => {
      const [version, material] = part.split(':', 2);
      return { version: version ?? '', key: Buffer.from(material ?? '', 'base64') };
    });
    for (const { version, key } of keys) {
      if (!/^v\d+$/.test(version)) ctx.addIssue({ code: 'custom', message: `key version "${version}" must look like v1, v2, ...` });
      if (key.length !== KEY_BYTES) ctx.addIssue({ code: 'custom', message: `key ${version} must be 32 bytes, base64-encoded` });
    }
    if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'must hold at least one key' });
    return keys;
  });
