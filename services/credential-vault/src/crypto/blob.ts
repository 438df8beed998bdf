export { formatBlob, parseBlob, type ParsedBlob } from '@latchkey/crypto';

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
