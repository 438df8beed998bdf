export { DecryptionError, IV_BYTES, KEY_BYTES, TAG_BYTES, open, seal, type Sealed } from './aead.js';
export { formatBlob, parseBlob, type ParsedBlob } from './blob.js';
export { createKekSet, versionNumber, versionedKeys, type Kek, type KekSet } from './kek.js';
