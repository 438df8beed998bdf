import type { Connection } from 'mongoose';
import { isDuplicateKey } from '@latchkey/mongo';
import { AppError } from '@latchkey/errors';
import { parseBlob } from '@latchkey/crypto';
import { signingKeyField, variableField, type SettingsCipher } from '../domain/settings-cipher.js';
import { rotateSigningKeys, type SigningKey } from '../domain/signing-keys.js';
import { environmentModel, type EnvironmentDoc } from './environment-model.js';
import { newId, newPublicId } from '../domain/ids.js';

export type EnvironmentPatch = Partial<
  Pick<EnvironmentDoc, 'webhook_url' | 'webhook_url_secondary' | 'send_auth_webhooks' | 'callback_url' | 'connect_return_origins' | 'variables'>
>;

/**
 * Environments, with their secret settings (signing keys, variable values) sealed at rest: this
 * repository is the only code that reads or writes the collection, it seals every secret it
 * writes and opens every secret it reads, so callers only ever see plaintext and nothing can
 * store it. Reads are strict: a value that is not a blob sealed for its environment and field fails.
 */
export function createEnvironmentRepo(connection: Connection, cipher: SettingsCipher) {
  const model = environmentModel(connection);

  const sealKeys = (environmentId: string, keys: readonly SigningKey[]): SigningKey[] =>
    keys.map((key) => ({ ...key, secret: cipher.seal(environmentId, signingKeyField(key.created_at), key.secret) }));
  const sealVariables = (environmentId: string, variables: ReadonlyArray<{ name: string; value: string }>) =>
    variables.map(({ name, value }) => ({ name, value: cipher.seal(environmentId, variableField(name), value) }));

  function reveal(doc: EnvironmentDoc): EnvironmentDoc;
  function reveal(doc: EnvironmentDoc | null): EnvironmentDoc | null;
  function reveal(doc: EnvironmentDoc | null): EnvironmentDoc | null {
    if (!doc) return null;
    return {
      ...doc,
      signing_keys: doc.signing_keys.map((key) => ({ ...key, secret: cipher.open(doc._id, signingKeyField(key.created_at), key.secret) })),
      variables: doc.variables.map(({ name, value }) => ({ name, value: cipher.open(doc._id, variableField(name), value) })),
    };
  }

  /** A stored value as plaintext: opened if it is a blob, taken as is if it predates encryption. */
  const plaintextOf = (environmentId: string, field: string, stored: string): string => {
    try {
      parseBlob(stored);
    } catch {
      return stored;
    }
    return cipher.open(environmentId, field, stored);
  };

  /** Whether a stored secret of this environment is in plaintext, or sealed under another key than the sealing one. */
  const isStale = (doc: EnvironmentDoc) =>
    [...doc.signing_keys.map((key) => key.secret), ...doc.variables.map((variable) => variable.value)].some((stored) => !cipher.isCurrent(stored));

  /**
   * Reseals one environment's secrets, read afresh: a compare-and-set on `updated_at`, retried, which
   * moves it. On FerretDB the compare-and-set does not guard (an update reads and writes back the
   * whole document), so the gateway runs this under the environment's write key, as every other
   * write (environment-writes.ts). Answers whether it rewrote the environment.
   */
  async function sealOne(id: string): Promise<boolean> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const doc = await model.findById(id).lean<EnvironmentDoc>().exec();
      if (!doc || !isStale(doc)) return false;
      const signingKeys = doc.signing_keys.map((key) => ({ ...key, secret: plaintextOf(doc._id, signingKeyField(key.created_at), key.secret) }));
      const variables = doc.variables.map(({ name, value }) => ({ name, value: plaintextOf(doc._id, variableField(name), value) }));
      const result = await model
        .updateOne({ _id: id, updated_at: doc.updated_at }, { $set: { signing_keys: sealKeys(id, signingKeys), variables: sealVariables(id, variables), updated_at: new Date() } })
        .exec();
      if (result.matchedCount === 1) return true;
    }
    return false;
  }

  return {
    init: () => model.init(),
    sealOne,
    /**
     * Seals what an earlier version stored in plaintext, and reseals what an older key sealed, in
     * every environment. Run at start, before serving, while other replicas may serve and write:
     * `seal` rewrites one environment (the gateway's takes its write key; `sealOne` by default).
     * Only the environments read stale are rewritten. Returns how many it rewrote.
     */
    async sealAtRest(options: { seal?: (id: string) => Promise<boolean> } = {}): Promise<number> {
      const seal = options.seal ?? sealOne;
      let rewritten = 0;
      for (const { _id: id } of await model.find({}, { _id: 1 }).lean<Array<{ _id: string }>>().exec()) {
        const doc = await model.findById(id).lean<EnvironmentDoc>().exec();
        if (doc && isStale(doc) && (await seal(id))) rewritten++;
      }
      return rewritten;
    },
    /** Throws `duplicate_environment` when the name is taken. */
    async create(input: { name: string; account_id: string; signing_key: SigningKey }): Promise<EnvironmentDoc> {
      const now = new Date();
      const id = newId('env');
      try {
        const created = await model.create({
          _id: id,
          account_id: input.account_id,
          name: input.name,
          public_id: newPublicId(),
          webhook_url: null,
          webhook_url_secondary: null,
          send_auth_webhooks: false,
          callback_url: null,
          connect_return_origins: [],
          variables: [],
          signing_keys: sealKeys(id, [input.signing_key]),
          created_at: now,
          updated_at: now,
        });
        return reveal(created.toObject());
      } catch (error) {
        if (isDuplicateKey(error)) throw new AppError('duplicate_environment', `An environment named "${input.name}" exists already`);
        throw error;
      }
    },
    findById: async (id: string) => reveal(await model.findById(id).lean<EnvironmentDoc>().exec()),
    findByName: async (name: string) => reveal(await model.findOne({ name }).lean<EnvironmentDoc>().exec()),
    findByPublicId: async (publicId: string) => reveal(await model.findOne({ public_id: publicId }).lean<EnvironmentDoc>().exec()),
    list: async () => (await model.find({}).sort({ created_at: 1 }).lean<EnvironmentDoc[]>().exec()).map((doc) => reveal(doc)),
    /** Sets the given fields only; returns the updated environment or null. */
    async update(id: string, patch: EnvironmentPatch): Promise<EnvironmentDoc | null> {
      const sealed = patch.variables ? { ...patch, variables: sealVariables(id, patch.variables) } : patch;
      const result = await model.updateOne({ _id: id }, { $set: { ...sealed, updated_at: new Date() } }).exec();
      if (result.matchedCount === 0) return null;
      return reveal(await model.findById(id).lean<EnvironmentDoc>().exec());
    },
    /** Records that the bootstrap key of this digest was made (see `bootstrap_key_digest`); run under the environment's write key. */
    async markBootstrapKey(id: string, digest: string): Promise<void> {
      await model.updateOne({ _id: id }, { $set: { bootstrap_key_digest: digest } }).exec();
    },
    /**
     * A new signing key: the stored keys read afresh, rotated and written back (the caller runs
     * it alone per environment: environment-writes.ts). Returns the new list, null when the
     * environment is gone.
     */
    async rotateSigningKeys(id: string, at: Date): Promise<SigningKey[] | null> {
      const doc = reveal(await model.findById(id).lean<EnvironmentDoc>().exec());
      if (!doc) return null;
      const keys = rotateSigningKeys(doc.signing_keys, at);
      await model.updateOne({ _id: id }, { $set: { signing_keys: sealKeys(id, keys), updated_at: new Date() } }).exec();
      return keys;
    },
  };
}

export type EnvironmentRepo = ReturnType<typeof createEnvironmentRepo>;
