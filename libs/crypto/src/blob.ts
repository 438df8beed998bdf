import { DecryptionError, IV_BYTES, TAG_BYTES, type Sealed } from './aead.js';

export interface ParsedBlob {
  dataKeyVersion: number;
  sealed: Sealed;
}

/**
 * `lk1.<key version>.<iv>.<tag>.<ciphertext>`, base64url parts. The prefix names the format so it
 * can change later; the version names the key that sealed it (a vault data key, a gateway
 * settings key), and belongs in the additional data so the whole header is authenticated.
 */
const PREFIX = 'lk1';

/** Strict base64url: only the canonical spelling decodes, so any edit to a blob string is caught. */
function decodePart(part: string): Buffer | null {
  const bytes = Buffer.from(part, 'base64url');
  return bytes.toString('base64url') === part ? bytes : null;
}

export function formatBlob(dataKeyVersion: number, sealed: Sealed): string {
  return [PREFIX, String(dataKeyVersion), sealed.iv, sealed.tag, sealed.ciphertext]
    .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
    .join('.');
}

export function parseBlob(blob: string): ParsedBlob {
  const [prefix, version, ...encoded] = blob.split('.');
  const [iv, tag, ciphertext] = encoded.map(decodePart);
  if (
    prefix !== PREFIX ||
    version === undefined ||
    !/^[1-9]\d{0,8}$/.test(version) ||
    encoded.length !== 3 ||
    !iv ||
    !tag ||
    !ciphertext ||
    iv.length !== IV_BYTES ||
    tag.length !== TAG_BYTES
  ) {
    throw new DecryptionError('not a credential blob');
  }
  return { dataKeyVersion: Number(version), sealed: { iv, tag, ciphertext } };
}
