import type { Connection } from 'mongoose';
import { isDuplicateKey } from '@latchkey/mongo';
import { AppError } from '@latchkey/errors';
import type { SigningKey } from '../domain/signing-keys.js';
import { environmentModel, type EnvironmentDoc } from './environment-model.js';
import { newId, newPublicId } from '../domain/ids.js';

export type EnvironmentPatch = Partial<
  Pick<EnvironmentDoc, 'webhook_url' | 'webhook_url_secondary' | 'send_auth_webhooks' | 'callback_url' | 'connect_return_origins' | 'variables'>
>;

export function createEnvironmentRepo(connection: Connection) {
  const model = environmentModel(connection);
  return {
    init: () => model.init(),
    /** Throws `duplicate_environment` when the name is taken. */
    async create(input: { name: string; account_id: string; signing_key: SigningKey }): Promise<EnvironmentDoc> {
      const now = new Date();
      try {
        const created = await model.create({
          _id: newId('env'),
          account_id: input.account_id,
          name: input.name,
          public_id: newPublicId(),
          webhook_url: null,
          webhook_url_secondary: null,
          send_auth_webhooks: false,
          callback_url: null,
          connect_return_origins: [],
          variables: [],
          signing_keys: [input.signing_key],
          created_at: now,
          updated_at: now,
        });
        return created.toObject();
      } catch (error) {
        if (isDuplicateKey(error)) throw new AppError('duplicate_environment', `An environment named "${input.name}" exists already`);
        throw error;
      }
    },
    findById: (id: string) => model.findById(id).lean<EnvironmentDoc>().exec(),
    findByName: (name: string) => model.findOne({ name }).lean<EnvironmentDoc>().exec(),
    findByPublicId: (publicId: string) => model.findOne({ public_id: publicId }).lean<EnvironmentDoc>().exec(),
    list: () => model.find({}).sort({ created_at: 1 }).lean<EnvironmentDoc[]>().exec(),
    /** Sets the given fields only; returns the updated environment or null. */
    async update(id: string, patch: EnvironmentPatch): Promise<EnvironmentDoc | null> {
      const result = await model.updateOne({ _id: id }, { $set: { ...patch, updated_at: new Date() } }).exec();
      if (result.matchedCount === 0) return null;
      return model.findById(id).lean<EnvironmentDoc>().exec();
    },
    async replaceSigningKeys(id: string, keys: SigningKey[]): Promise<void> {
      await model.updateOne({ _id: id }, { $set: { signing_keys: keys, updated_at: new Date() } }).exec();
    },
  };
}

export type EnvironmentRepo = ReturnType<typeof createEnvironmentRepo>;
