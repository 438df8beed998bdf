import type { Connection } from 'mongoose';
import { isDuplicateKey } from '@latchkey/mongo';
import { accountModel, type AccountDoc } from './account-model.js';
import { newId } from '../domain/ids.js';

export function createAccountRepo(connection: Connection) {
  const model = accountModel(connection);
  return {
    init: () => model.init(),
    /** Finds the account by name or creates it; safe when replicas race (unique name). */
    async ensure(name: string): Promise<AccountDoc> {
      const existing = await model.findOne({ name }).lean<AccountDoc>().exec();
      if (existing) return existing;
      try {
        return (await model.create({ _id: newId('acc'), name, created_at: new Date() })).toObject();
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        const winner = await model.findOne({ name }).lean<AccountDoc>().exec();
        if (!winner) throw error;
        return winner;
      }
    },
    async findById(id: string): Promise<AccountDoc | null> {
      return model.findById(id).lean<AccountDoc>().exec();
    },
  };
}

export type AccountRepo = ReturnType<typeof createAccountRepo>;
