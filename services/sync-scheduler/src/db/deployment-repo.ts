import type { Connection } from 'mongoose';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import {
  deploymentHeadKey,
  deploymentHeadModel,
  deploymentKey,
  deploymentModel,
  fromStoredDescription,
  toStoredDescription,
  type DeployedFunctionDoc,
  type DeploymentDoc,
} from './deployment-model.js';

/** Older versions kept per integration (for a look back; only the newest runs). */
const KEPT_VERSIONS = 5;

export type DeploymentSummary = Omit<DeploymentDoc, 'functions'> & { functions: Array<Omit<DeployedFunctionDoc, 'bundle'>> };

/** A version of an integration's deployment and that deployment's `_id` (null: no deployment). */
interface Place {
  version: number;
  id: string | null;
}

export interface CurrentOptions {
  /**
   * A version known to be deployed (`functions.deployed` announced it): a current one below it
   * was deployed by a replica of an earlier version, which raises no head, and is looked for as
   * before heads were kept.
   */
  atLeast?: number;
}

export function createDeploymentRepo(connection: Connection) {
  const model = deploymentModel(connection);
  const heads = deploymentHeadModel(connection);

  /** Descriptions as callers know them, from what the database holds. */
  function decoded<D extends { functions: Array<Omit<DeployedFunctionDoc, 'bundle'>> }>(doc: D): D {
    return { ...doc, functions: doc.functions.map((fn) => ({ ...fn, description: fromStoredDescription(fn.description) })) };
  }

  /**
   * Raises an integration's head to `place`, never lowers it: an update while it is below, else
   * an insert, which the unique `_id` refuses when a head at or above it is there already.
   */
  async function raise(environment: EnvironmentId, providerConfigKey: string, place: Place): Promise<void> {
    try {
      await heads
        .updateOne(
          { _id: deploymentHeadKey(environment, providerConfigKey), version: { $lt: place.version } },
          { $set: { environment_id: environment, provider_config_key: providerConfigKey, version: place.version, deployment_id: place.id } },
          { upsert: true },
        )
        .exec();
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
  }

  /**
   * The newest deployment by the query from before heads were kept (on FerretDB, a read of every
   * deployment), and the head raised to it. Taken once for an integration with no head yet (one
   * deployed before heads were kept, or never), and when the head cannot tell: the deployment it
   * names is gone (its integration removed as a reader raised it), or a version was taken or
   * announced past it by a replica of an earlier version.
   */
  async function readNewest(environment: EnvironmentId, providerConfigKey: string): Promise<Place> {
    const newest = await model
      .findOne({ environment_id: environment, provider_config_key: providerConfigKey })
      .sort({ version: -1 })
      .select({ version: 1 })
      .lean()
      .exec();
    const place = newest ? { version: newest.version, id: newest._id } : { version: 0, id: null };
    await raise(environment, providerConfigKey, place);
    return place;
  }

  /**
   * The current deployment, read by `read` (with or without code): the head, then the deployment
   * it names and a look for the next version, together, on past the head while a next one is
   * stored (the head is raised to it then). `_id` lookups only, but in `readNewest`'s cases.
   */
  async function current<D extends { version: number }>(
    environment: EnvironmentId,
    providerConfigKey: string,
    read: (id: string) => Promise<D | null>,
    options: CurrentOptions,
  ): Promise<D | null> {
    const head = await heads.findById(deploymentHeadKey(environment, providerConfigKey)).lean().exec();
    let place: Place = head ? { version: head.version, id: head.deployment_id } : await readNewest(environment, providerConfigKey);
    let behind = false;
    for (;;) {
      const nextId = deploymentKey(environment, providerConfigKey, place.version + 1);
      const [doc, next] = await Promise.all([place.id === null ? null : read(place.id), model.exists({ _id: nextId }).exec()]);
      if (next) {
        place = { version: place.version + 1, id: nextId };
        behind = true;
        continue;
      }
      if (behind) await raise(environment, providerConfigKey, place);
      if ((place.id === null || doc !== null) && (doc?.version ?? 0) >= (options.atLeast ?? 0)) return doc;
      const newest = await readNewest(environment, providerConfigKey);
      return newest.id === null ? null : read(newest.id);
    }
  }

  return {
    init: async () => {
      await model.init();
      await heads.init();
    },
    /** The current deployment with its code: for the one caller that runs a function. */
    async current(environment: EnvironmentId, providerConfigKey: string, options: CurrentOptions = {}): Promise<DeploymentDoc | null> {
      const doc = await current(environment, providerConfigKey, (id) => model.findById(id).lean<DeploymentDoc>().exec(), options);
      return doc && decoded(doc);
    },
    /**
     * The current deployment without code (up to 768 KiB a function): for callers that need
     * what the functions declare (syncs, webhook subscriptions, lifecycle events, actions).
     */
    async currentDescriptions(environment: EnvironmentId, providerConfigKey: string, options: CurrentOptions = {}): Promise<DeploymentSummary | null> {
      const doc = await current(environment, providerConfigKey, (id) => model.findById(id).select({ 'functions.bundle': 0 }).lean<DeploymentSummary>().exec(), options);
      return doc && decoded(doc);
    },
    /**
     * Inserts the next version, then raises the head to it. Two deploys racing for one version:
     * the unique `_id` (and index) lets one in, the other takes the next number.
     */
    async insertNext(environment: EnvironmentId, providerConfigKey: string, functions: DeployedFunctionDoc[]): Promise<DeploymentDoc> {
      for (let attempt = 0; ; attempt++) {
        const latest = await current(environment, providerConfigKey, (id) => model.findById(id).select({ version: 1 }).lean<{ version: number }>().exec(), {});
        const version = (latest?.version ?? 0) + 1;
        const doc: DeploymentDoc = {
          _id: deploymentKey(environment, providerConfigKey, version),
          environment_id: environment,
          provider_config_key: providerConfigKey,
          version,
          functions,
          created_at: new Date(),
        };
        try {
          await model.create({ ...doc, functions: functions.map((fn) => ({ ...fn, description: toStoredDescription(fn.description) })) });
        } catch (error) {
          if (!isDuplicateKey(error) || attempt >= 10) throw error;
          // A concurrent deploy's is found by `_id` on the next try; one stored without a head
          // (by a replica of an earlier version) only by the query from before heads.
          if ((await model.exists({ _id: doc._id }).exec()) === null) await readNewest(environment, providerConfigKey);
          continue;
        }
        await raise(environment, providerConfigKey, { version, id: doc._id });
        await model
          .deleteMany({ environment_id: environment, provider_config_key: providerConfigKey, version: { $lte: doc.version - KEPT_VERSIONS } })
          .exec();
        return doc;
      }
    },
    /**
     * Drops the deployments of a key made up to `upTo` (a later one is a new integration's), then
     * its head, which may name one of them: the next reader finds what is left as before heads
     * were kept, and a deploy with none left is version 1 again.
     */
    async removeUpTo(environment: EnvironmentId, providerConfigKey: string, upTo: Date): Promise<number> {
      const { deletedCount } = await model.deleteMany({ environment_id: environment, provider_config_key: providerConfigKey, created_at: { $lte: upTo } }).exec();
      await heads.deleteOne({ _id: deploymentHeadKey(environment, providerConfigKey) }).exec();
      return deletedCount;
    },
    /** Every stored deployment of the environment, without code. */
    async summaries(environment: EnvironmentId): Promise<DeploymentSummary[]> {
      return ((await model.find({ environment_id: environment }).select({ 'functions.bundle': 0 }).lean().exec()) as DeploymentSummary[]).map(decoded);
    },
  };
}

export type DeploymentRepo = ReturnType<typeof createDeploymentRepo>;
