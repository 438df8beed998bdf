import { createCache } from '@latchkey/cache';
import type { EnvironmentId } from '@latchkey/mongo';
import type { z } from 'zod';
import type { DataKeyDoc } from '../db/data-key-model.js';
import type { DataKeyRepo } from '../db/data-key-repo.js';
import { DecryptionError, open, seal } from './aead.js';
import { credentialAad, formatBlob, parseBlob, type CredentialAad } from './blob.js';
import { createKekSet, newDataKey, unwrapDataKey, wrapDataKey, type Kek } from './kek.js';

export interface KeyringDeps {
  /** `ENCRYPTION_KEYS` from config: every listed version unwraps. */
  keks: readonly Kek[];
  /**
   * `ENCRYPTION_SEALING_VERSION`: the version that wraps new data keys and that `rotate` moves
   * them to; the highest listed when absent. A rolling update that adds a KEK keeps the old one
   * sealing until every replica holds the new one.
   */
  sealingVersion?: string | undefined;
  dataKeys: Pick<
    DataKeyRepo,
    'findActive' | 'findLatest' | 'findByVersion' | 'insert' | 'retireOlderThan' | 'listAll' | 'rewrap'
  >;
  /**
   * How long this process trusts its idea of an environment's active data-key version before
   * asking the database again, so a data-key rotation made by another replica reaches new writes
   * within this delay. Unwrapped keys themselves are kept for `DATA_KEY_TTL_MS`.
   */
  activeVersionTtlMs?: number;
}

/** Unwrapped data keys are kept this long (they never change; the bound is on memory only). */
const DATA_KEY_TTL_MS = 60 * 60 * 1000;
/** Environments (and data-key versions) held at once; past it the least recently used go. */
const MAX_DATA_KEYS = 100_000;

export interface KekRotationReport {
  /** Data keys this call moved to the sealing KEK. */
  rewrapped: number;
  /** Already under the sealing KEK, or moved by a rotation running at the same time. */
  unchanged: number;
  /**
   * Keys this process cannot move (their KEK is not configured, or their wrap does not verify),
   * and any key found under another KEK once the pass is over (another writer moved it meanwhile).
   */
  failed: Array<{ id: string; reason: string }>;
}

/**
 * Envelope encryption for credentials. Each environment has versioned data keys (AES-256-GCM),
 * stored only wrapped by a configured KEK. Invariants:
 * - a credential blob decrypts only in the environment, connection/integration and field it was
 *   sealed for, and names the data-key version that sealed it;
 * - a data-key version, once stored, never changes (rotation re-wraps it, the key stays), so old
 *   blobs keep decrypting across KEK and data-key rotations;
 * - raw data keys exist only in this process's memory, never in the database, logs or errors.
 */
export function createKeyring(deps: KeyringDeps) {
  const keks = createKekSet(deps.keks);
  const named = deps.sealingVersion === undefined ? keks.newest : keks.get(deps.sealingVersion);
  if (!named) throw new Error(`the sealing version ${deps.sealingVersion} is not among ENCRYPTION_KEYS`);
  const sealing: Kek = named;
  const activeVersionTtlMs = deps.activeVersionTtlMs ?? 60_000;
  // Concurrent first uses share one database read and one unwrap; a failed load is not kept, so
  // the next call tries again. A stored data-key version never changes, so its entry only ages
  // out to bound memory; the active version is re-read every `activeVersionTtlMs`.
  const dataKeys = createCache<Buffer>({ ttlMs: DATA_KEY_TTL_MS, maxEntries: MAX_DATA_KEYS });
  const activeVersions = createCache<number>({ ttlMs: activeVersionTtlMs, maxEntries: MAX_DATA_KEYS });

  function unwrap(environment: EnvironmentId, doc: DataKeyDoc): Buffer {
    const kek = keks.get(doc.kek_version);
    if (!kek) {
      throw new Error(
        `data key v${doc.version} of environment ${environment} is wrapped with KEK ${doc.kek_version}, ` +
          `which ENCRYPTION_KEYS does not hold (it holds ${keks.versions.join(', ')})`,
      );
    }
    try {
      return unwrapDataKey(kek, environment, doc.version, doc.wrapped);
    } catch (error) {
      // Said apart from a tampered credential: this is usually KEK material changed under an old name.
      throw new DecryptionError(`data key v${doc.version} of environment ${environment} does not unwrap under KEK ${doc.kek_version}`, { cause: error });
    }
  }

  async function cachedDataKey(environment: EnvironmentId, version: number, load: () => Promise<Buffer>): Promise<Buffer> {
    return dataKeys.load(`${environment}:${version}`, load);
  }

  function dataKey(environment: EnvironmentId, version: number): Promise<Buffer> {
    return cachedDataKey(environment, version, async () => {
      const doc = await deps.dataKeys.findByVersion(environment, version);
      // Typically a blob copied in from another environment.
      if (!doc) throw new DecryptionError(`environment ${environment} has no data key v${version}`);
      return unwrap(environment, doc);
    });
  }

  /** Caches the stored key's unwrapped form and answers its version. */
  async function adopt(environment: EnvironmentId, doc: DataKeyDoc): Promise<number> {
    await cachedDataKey(environment, doc.version, async () => unwrap(environment, doc));
    return doc.version;
  }

  /** Stores version `latest + 1`; replicas racing for the same number all adopt the stored one. */
  async function createDataKey(environment: EnvironmentId, latest: DataKeyDoc | null): Promise<number> {
    const version = (latest?.version ?? 0) + 1;
    const stored = await deps.dataKeys.insert(environment, {
      version,
      wrapped: wrapDataKey(sealing, environment, version, newDataKey()),
      kek_version: sealing.version,
    });
    // Adopt what was stored, not what was generated: if another replica won, ours is discarded.
    return adopt(environment, stored);
  }


  async function resolveActiveVersion(environment: EnvironmentId): Promise<number> {
    const active = await deps.dataKeys.findActive(environment);
    if (active) return adopt(environment, active);
    // No active key at that read. Another replica may have created one since: the latest key,
    // if not retired, is the active one, and numbering past it would start a second version.
    const latest = await deps.dataKeys.findLatest(environment);
    if (latest && latest.retired_at === null) return adopt(environment, latest);
    return createDataKey(environment, latest);
  }

  async function activeVersion(environment: EnvironmentId): Promise<number> {
    return activeVersions.load(environment, () => resolveActiveVersion(environment), { tag: environment, place: () => ({ tags: [environment] }) });
  }

  async function encrypt(environment: EnvironmentId, aad: CredentialAad, plaintext: string): Promise<string> {
    const version = await activeVersion(environment);
    const key = await dataKey(environment, version);
    return formatBlob(version, seal(key, Buffer.from(plaintext, 'utf8'), credentialAad(environment, version, aad)));
  }

  async function decrypt(environment: EnvironmentId, aad: CredentialAad, blob: string): Promise<string> {
    const { dataKeyVersion, sealed } = parseBlob(blob);
    const key = await dataKey(environment, dataKeyVersion);
    return open(key, sealed, credentialAad(environment, dataKeyVersion, aad)).toString('utf8');
  }

  return {
    encrypt,
    decrypt,

    encryptJson: (environment: EnvironmentId, aad: CredentialAad, value: object): Promise<string> =>
      encrypt(environment, aad, JSON.stringify(value)),

    /** Decrypts and validates. Errors name the failing paths only, never the decrypted text. */
    async decryptJson<S extends z.ZodType>(environment: EnvironmentId, aad: CredentialAad, blob: string, schema: S): Promise<z.output<S>> {
      const text = await decrypt(environment, aad, blob);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        // JSON.parse's own message quotes the input, which here is a secret.
        throw new DecryptionError(`credential ${aad.field} is not JSON`);
      }
      const parsed = schema.safeParse(value);
      if (!parsed.success) {
        const paths = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
        throw new DecryptionError(`credential ${aad.field} does not match its schema at ${paths}`);
      }
      return parsed.data;
    },

    /**
     * For a background pass over stored credentials: verifies `blob` and returns it sealed under
     * the environment's active data key. Returns `blob` itself when it is already current, so the
     * caller can skip the write by comparing.
     */
    async reencrypt(environment: EnvironmentId, aad: CredentialAad, blob: string): Promise<string> {
      const { dataKeyVersion } = parseBlob(blob);
      const plaintext = await decrypt(environment, aad, blob);
      if (dataKeyVersion === (await activeVersion(environment))) return blob;
      return encrypt(environment, aad, plaintext);
    },

    /**
     * Starts a new data-key version for the environment: new writes use it at once here and
     * within `activeVersionTtlMs` on other replicas; older versions keep decrypting. Concurrent
     * calls converge on one new version. Returns the new version.
     */
    async rotateDataKey(environment: EnvironmentId): Promise<number> {
      const version = await createDataKey(environment, await deps.dataKeys.findLatest(environment));
      await deps.dataKeys.retireOlderThan(environment, version, new Date());
      // A resolution in flight may predate the rotation: it must not overwrite the new version.
      activeVersions.invalidate(environment);
      activeVersions.set(environment, version, { tags: [environment] });
      return version;
    },

    /**
     * Re-wraps every data key not under the sealing KEK, one at a time, without a transaction:
     * each re-wrap is a single-document compare-and-set, and both the old and the new wrap hold
     * the same key, so serving continues throughout and a rerun only finishes what is left.
     * Then every key is read again, and one not under the sealing KEK is reported failed: a
     * concurrent writer (a rotation on a replica of an older release, which does not take the
     * rotation lock, sealing with another version) can undo a re-wrap counted here, since on
     * FerretDB a compare-and-set is a read and a rewrite. Once `failed` is empty, no key is
     * under an old KEK, and that KEK can be removed from `ENCRYPTION_KEYS`.
     */
    async rotate(): Promise<KekRotationReport> {
      const report: KekRotationReport = { rewrapped: 0, unchanged: 0, failed: [] };
      for await (const doc of deps.dataKeys.listAll()) {
        if (doc.kek_version === sealing.version) {
          report.unchanged += 1;
          continue;
        }
        const kek = keks.get(doc.kek_version);
        if (!kek) {
          report.failed.push({ id: doc._id, reason: `KEK ${doc.kek_version} is not configured` });
          continue;
        }
        let key: Buffer;
        try {
          // The wrap binds the record's own environment: a record moved between environments fails here.
          key = unwrapDataKey(kek, doc.environment_id, doc.version, doc.wrapped);
        } catch {
          report.failed.push({ id: doc._id, reason: `wrap under KEK ${doc.kek_version} does not verify` });
          continue;
        }
        const wrapped = wrapDataKey(sealing, doc.environment_id, doc.version, key);
        if (await deps.dataKeys.rewrap(doc._id, wrapped, sealing.version, doc.kek_version)) report.rewrapped += 1;
        else report.unchanged += 1;
      }
      const reported = new Set(report.failed.map((failure) => failure.id));
      for await (const doc of deps.dataKeys.listAll()) {
        if (doc.kek_version === sealing.version || reported.has(doc._id)) continue;
        report.failed.push({ id: doc._id, reason: `under KEK ${doc.kek_version} after the pass (another writer moved it meanwhile); rotate again` });
      }
      return report;
    },
  };
}

export type Keyring = ReturnType<typeof createKeyring>;
