import { DecryptionError, createKekSet, formatBlob, open, parseBlob, seal, versionNumber, type Kek } from '@latchkey/crypto';

/**
 * Encryption at rest of an environment's secret settings (webhook signing keys, variable values):
 * AES-256-GCM under the newest key of SETTINGS_ENCRYPTION_KEYS, in the vault's blob format
 * (`lk1.<key version>.<iv>.<tag>.<ciphertext>`). The additional data binds each ciphertext to its
 * environment, its field (`signing_key/<created at>`, `variable/<name>`) and the key version, so a
 * blob copied to another environment or field does not open. Older key versions still open what
 * they sealed; every start reseals what an older version sealed (see environment-repo.ts).
 */
export function createSettingsCipher(keks: readonly Kek[]) {
  const set = createKekSet(keks);
  const newestVersion = versionNumber(set.newest);
  const aad = (environmentId: string, version: number, field: string) =>
    Buffer.from(JSON.stringify(['latchkey/gateway-setting/v1', environmentId, version, field]), 'utf8');

  return {
    seal(environmentId: string, field: string, plaintext: string): string {
      return formatBlob(newestVersion, seal(set.newest.key, Buffer.from(plaintext, 'utf8'), aad(environmentId, newestVersion, field)));
    },
    /** Throws DecryptionError for anything but a blob sealed for this environment and field. */
    open(environmentId: string, field: string, blob: string): string {
      const { dataKeyVersion: version, sealed } = parseBlob(blob);
      const kek = set.get(`v${version}`);
      if (!kek) throw new DecryptionError(`settings key v${version} is not configured`);
      return open(kek.key, sealed, aad(environmentId, version, field)).toString('utf8');
    },
    /** Whether a stored value is sealed under the newest key already (else it needs resealing). */
    isCurrent(stored: string): boolean {
      try {
        return parseBlob(stored).dataKeyVersion === newestVersion;
      } catch {
        return false;
      }
    },
  };
}

export type SettingsCipher = ReturnType<typeof createSettingsCipher>;

export const signingKeyField = (createdAt: Date) => `signing_key/${new Date(createdAt).toISOString()}`;
export const variableField = (name: string) => `variable/${name}`;
