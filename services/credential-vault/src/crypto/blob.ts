import { DecryptionError, IV_BYTES, TAG_BYTES, type Sealed } from './aead.js';

/**
 * Where a credential belongs. A ciphertext only decrypts with the same environment, connection,
 * integration and field it was written for, so a blob copied between documents or fields fails.
 */
export interface CredentialAad {
  connectionId?: string;
  integrationId?: string;
  /** The credential's name within its document: `access_token`, `client_secret`, ... */
  field: string;
}

export interface ParsedBlob {
  dataKeyVersion: number;
  sealed: Sealed;
}

/**
 * `lk1.<data-key version>.<iv>.<tag>.<ciphertext>`, base64url parts. The prefix names the format
 * so it can change later; the version names the environment's data key that sealed it.
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

/**
 * The additional authenticated data of a credential. A JSON array with fixed positions is
 * unambiguous (no separator can be smuggled inside an id, and an absent id differs from an empty
 * one). The data-key version is included so the whole header of the blob is authenticated.
 */
export function credentialAad(environmentId: string, dataKeyVersion: number, aad: CredentialAad): Buffer {
  return Buffer.from(
    JSON.stringify([
      'latchkey/credential/v1',
      environmentId,
      dataKeyVersion,
      aad.connectionId ?? null,
      aad.integrationId ?? null,
      aad.field,
    ]),
    'utf8',
  );
}
