import { DecryptionError, createKekSet, formatBlob, open, parseBlob, seal, versionNumber, type Kek } from '@latchkey/crypto';

/**
 * Encryption at rest of an environment's secret settings (webhook signing keys, variable values):
 * AES-256-GCM in the vault's blob format (`lk1.<key version>.<iv>.<tag>.<ciphertext>`), sealed
 * under one key of SETTINGS_ENCRYPTION_KEYS (`sealingVersion`, else the newest) and opened under
 * any of them. The additional data binds each ciphertext to its environment, its field
 * (`signing_key/<created at>`, `variable/<name>`) and the key version, so a blob copied to another
 * environment or field does not open. Every start reseals what another version sealed (see
 * environment-repo.ts); naming the sealing version lets a rotation across replicas first give
 * every replica the new key, and only then seal with it.
 */
export function createSettingsCipher(keks: readonly Kek[], options: { sealingVersion?: string | undefined } = {}) {
  const set = createKekSet(keks);
  const sealing = options.sealingVersion === undefined ? set.newest : set.get(options.sealingVersion);
  if (!sealing) throw new Error(`the sealing version ${options.sealingVersion} is not among the settings keys (${set.versions.join(', ')})`);
  const sealingVersion = versionNumber(sealing);
  const aad = (environmentId: string, version: number, field: string) =>
    Buffer.from(JSON.stringify(['latchkey/gateway-setting/v1', environmentId, version, field]), 'utf8');

  return {
    seal(environmentId: string, field: string, plaintext: string): string {
      return formatBlob(sealingVersion, seal(sealing.key, Buffer.from(plaintext, 'utf8'), aad(environmentId, sealingVersion, field)));
    },
    /** Throws DecryptionError for anything but a blob sealed for this environment and field. */
    open(environmentId: string, field: string, blob: string): string {
      const { dataKeyVersion: version, sealed } = parseBlob(blob);
      const kek = set.get(`v${version}`);
      if (!kek) throw new DecryptionError(`settings key v${version} is not configured`);
      return open(kek.key, sealed, aad(environmentId, version, field)).toString('utf8');
    },
    /** Whether a stored value is sealed under the sealing key already (else it needs resealing). */
    isCurrent(stored: string): boolean {
      try {
        return parseBlob(stored).dataKeyVersion === sealingVersion;
      } catch {
        return false;
      }
    },
  };
}

export type SettingsCipher = ReturnType<typeof createSettingsCipher>;

export const signingKeyField = (createdAt: Date) => `signing_key/${new Date(createdAt).toISOString()}`;
export const variableField = (name: string) => `variable/${name}`;
