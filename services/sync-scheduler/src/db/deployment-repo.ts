import { randomUUID } from 'node:crypto';
import type { Connection } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import { deploymentModel, fromStoredDescription, toStoredDescription, type DeployedFunctionDoc, type DeploymentDoc } from './deployment-model.js';

/** Older versions kept per integration (for a look back; only the newest runs). */
const KEPT_VERSIONS = 5;

export type DeploymentSummary = Omit<DeploymentDoc, 'functions'> & { functions: Array<Omit<DeployedFunctionDoc, 'bundle'>> };

export function createDeploymentRepo(connection: Connection) {
  const model = deploymentModel(connection);

  /** Descriptions as callers know them, from what the database holds. */
  function decoded<D extends { functions: Array<Omit<DeployedFunctionDoc, 'bundle'>> }>(doc: D): D {
    return { ...doc, functions: doc.functions.map((fn) => ({ ...fn, description: fromStoredDescription(fn.description) })) };
  }

  async function current(environment: EnvironmentId, providerConfigKey: string): Promise<DeploymentDoc | null> {
    const doc = (await model
      .findOne({ environment_id: environment, provider_config_key: providerConfigKey })
      .sort({ version: -1 })
      .lean()
      .exec()) as DeploymentDoc | null;
    return doc && decoded(doc);
  }

  return {
    init: () => model.init(),
    current,
    /**
     * Inserts the next version. Two deploys racing for one version: the unique index lets one
     * in, the other takes the next number.
     */
    async insertNext(environment: EnvironmentId, providerConfigKey: string, functions: DeployedFunctionDoc[]): Promise<DeploymentDoc> {
      for (let attempt = 0; ; attempt++) {
        const latest = await model
          .findOne({ environment_id: environment, provider_config_key: providerConfigKey })
          .sort({ version: -1 })
          .select({ version: 1 })
          .lean()
          .exec();
        const doc: DeploymentDoc = {
          _id: randomUUID(),
          environment_id: environment,
          provider_config_key: providerConfigKey,
          version: (latest?.version ?? 0) + 1,
          functions,
          created_at: new Date(),
        };
        try {
          await model.create({ ...doc, functions: functions.map((fn) => ({ ...fn, description: toStoredDescription(fn.description) })) });
        } catch (error) {
          if (isDuplicateKey(error) && attempt < 10) continue;
          throw error;
        }
        await model
          .deleteMany({ environment_id: environment, provider_config_key: providerConfigKey, version: { $lte: doc.version - KEPT_VERSIONS } })
          .exec();
        return doc;
      }
    },
    /** Drops the deployments of a key made up to `upTo` (a later one is a new integration's). */
    async removeUpTo(environment: EnvironmentId, providerConfigKey: string, upTo: Date): Promise<number> {
      const { deletedCount } = await model.deleteMany({ environment_id: environment, provider_config_key: providerConfigKey, created_at: { $lte: upTo } }).exec();
      return deletedCount;
    },
    /** Every stored deployment of the environment, without code. */
    async summaries(environment: EnvironmentId): Promise<DeploymentSummary[]> {
      return ((await model.find({ environment_id: environment }).select({ 'functions.bundle': 0 }).lean().exec()) as DeploymentSummary[]).map(decoded);
    },
  };
}

export type DeploymentRepo = ReturnType<typeof createDeploymentRepo>;
