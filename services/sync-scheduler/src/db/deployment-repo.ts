import { randomUUID } from 'node:crypto';
import type { Connection } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import { deploymentModel, type DeployedFunctionDoc, type DeploymentDoc } from './deployment-model.js';

/** Older versions kept per integration (for a look back; only the newest runs). */
const KEPT_VERSIONS = 5;

export type DeploymentSummary = Omit<DeploymentDoc, 'functions'> & { functions: Array<Omit<DeployedFunctionDoc, 'bundle'>> };

export function createDeploymentRepo(connection: Connection) {
  const model = deploymentModel(connection);

  async function current(environment: EnvironmentId, providerConfigKey: string): Promise<DeploymentDoc | null> {
    return (await model
      .findOne({ environment_id: environment, provider_config_key: providerConfigKey })
      .sort({ version: -1 })
      .lean()
      .exec()) as DeploymentDoc | null;
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
          await model.create(doc);
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
    /** Every stored deployment of the environment, without code. */
    async summaries(environment: EnvironmentId): Promise<DeploymentSummary[]> {
      return (await model.find({ environment_id: environment }).select({ 'functions.bundle': 0 }).lean().exec()) as DeploymentSummary[];
    },
  };
}

export type DeploymentRepo = ReturnType<typeof createDeploymentRepo>;
