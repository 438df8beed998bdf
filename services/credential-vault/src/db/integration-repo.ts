import type { Connection } from 'mongoose';
import type { Holding } from '@latchkey/bus';
import { AppError } from '@latchkey/errors';
import { isDuplicateKey, scopedRepo, type EnvironmentId } from '@latchkey/mongo';
import { integrationModel, type IntegrationDoc } from './integration-model.js';

/** The holding of a repository alone: one replica, nothing to lose (serialized-writes.ts takes real keys). */
const ALWAYS_HELD: Pick<Holding, 'assertHeld'> = { assertHeld: () => undefined };

export function createIntegrationRepo(connection: Connection) {
  const model = integrationModel(connection);
  const scoped = scopedRepo(model);
  const duplicate = (key: string) => new AppError('duplicate_provider_config', `An integration with unique_key "${key}" exists already`);
  return {
    init: () => model.init(),
    list: (environment: EnvironmentId) => scoped.find(environment, {}, { sort: { created_at: 1 } }),
    findByKey: (environment: EnvironmentId, uniqueKey: string) => scoped.findOne(environment, { unique_key: uniqueKey }),
    findById: (environment: EnvironmentId, id: string) => scoped.findOne(environment, { _id: id }),
    async insert(environment: EnvironmentId, doc: Omit<IntegrationDoc, 'environment_id'>): Promise<IntegrationDoc> {
      try {
        return await scoped.insert(environment, doc);
      } catch (error) {
        if (isDuplicateKey(error)) throw duplicate(doc.unique_key);
        throw error;
      }
    },
    /** Sets the given fields; a rename onto a taken key is `duplicate_provider_config`. */
    async update(environment: EnvironmentId, id: string, fields: Partial<Omit<IntegrationDoc, '_id' | 'environment_id'>>): Promise<void> {
      try {
        await scoped.updateOne(environment, { _id: id }, { $set: { ...fields, updated_at: new Date() } });
      } catch (error) {
        if (isDuplicateKey(error)) throw duplicate(String(fields.unique_key));
        throw error;
      }
    },
    remove: (environment: EnvironmentId, id: string) => scoped.deleteOne(environment, { _id: id }),
    /**
     * Runs `work`, a change to which connections the integration has (a connection's insert, its
     * rename's check and write, its removal), alone among such changes. Here it just runs: the
     * vault's replicas take the integration's members key (serialized-writes.ts).
     */
    holdingMembers: <T>(_integrationId: string, work: (holding: Pick<Holding, 'assertHeld'>) => Promise<T>): Promise<T> => work(ALWAYS_HELD),
    /** Compare-and-set of one encrypted field, for the background re-encryption. */
    swapField: (environment: EnvironmentId, id: string, field: 'credentials' | 'webhook_secret', previous: string, next: string) =>
      scoped.updateOne(environment, { _id: id, [field]: previous }, { $set: { [field]: next } }),
    environments: () => model.distinct('environment_id').exec() as Promise<string[]>,
    /** Integrations stored before each got its webhook secret at creation (the one-time backfill). */
    withoutWebhookSecret: (environment: EnvironmentId) => scoped.find(environment, { webhook_secret: null }),
    /**
     * Gives an integration its webhook secret unless it has one (the first writer wins). Not an
     * update of the integration: `updated_at` stays.
     */
    setWebhookSecretIfMissing: (environment: EnvironmentId, id: string, sealed: string) =>
      scoped.updateOne(environment, { _id: id, webhook_secret: null }, { $set: { webhook_secret: sealed } }),
  };
}

export type IntegrationRepo = ReturnType<typeof createIntegrationRepo>;
