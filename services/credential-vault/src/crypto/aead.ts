// AES-256-GCM lives in @latchkey/crypto, shared with the gateway's settings encryption.
export { DecryptionError, IV_BYTES, KEY_BYTES, TAG_BYTES, open, seal, type Sealed } from '@latchkey/crypto';
