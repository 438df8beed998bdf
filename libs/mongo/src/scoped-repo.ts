import type { Model, QueryFilter, UpdateQuery } from 'mongoose';

declare const environmentBrand: unique symbol;

/**
 * An environment's id, branded: repository functions take it first, so a query that forgets
 * the environment does not compile. Mint one only where the environment is known (the API key,
 * a validated contract payload).
 */
export type EnvironmentId = string & { readonly [environmentBrand]: true };

export function environmentId(id: string): EnvironmentId {
  return id as EnvironmentId;
}

/** Every scoped document carries its environment. */
export interface EnvironmentScoped {
  environment_id: string;
}

type Unscoped<T> = Omit<T, 'environment_id'>;

export interface FindOptions {
  sort?: Record<string, 1 | -1>;
  limit?: number;
  skip?: number;
}

/**
 * Queries on one collection with the environment always in the filter. Results are plain
 * objects (`lean`); writes never touch `environment_id`.
 */
export function scopedRepo<T extends EnvironmentScoped>(model: Model<T>) {
  const scope = (environment: EnvironmentId, filter: QueryFilter<Unscoped<T>> = {}) =>
    ({ ...filter, environment_id: environment }) as QueryFilter<T>;

  return {
    model,
    async findOne(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>>): Promise<T | null> {
      return (await model.findOne(scope(environment, filter)).lean().exec()) as T | null;
    },
    async find(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>> = {}, options: FindOptions = {}): Promise<T[]> {
      let query = model.find(scope(environment, filter));
      if (options.sort) query = query.sort(options.sort);
      if (options.skip !== undefined) query = query.skip(options.skip);
      if (options.limit !== undefined) query = query.limit(options.limit);
      return (await query.lean().exec()) as T[];
    },
    async count(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>> = {}): Promise<number> {
      return model.countDocuments(scope(environment, filter)).exec();
    },
    async insert(environment: EnvironmentId, doc: Unscoped<T>): Promise<T> {
      const created = await model.create({ ...doc, environment_id: environment } as unknown as T);
      return created.toObject() as T;
    },
    /** Returns whether a document matched. */
    async updateOne(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>>, update: UpdateQuery<Unscoped<T>>): Promise<boolean> {
      const result = await model.updateOne(scope(environment, filter), update as UpdateQuery<T>).exec();
      return result.matchedCount > 0;
    },
    async deleteOne(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>>): Promise<boolean> {
      const result = await model.deleteOne(scope(environment, filter)).exec();
      return result.deletedCount > 0;
    },
    async deleteMany(environment: EnvironmentId, filter: QueryFilter<Unscoped<T>> = {}): Promise<number> {
      const result = await model.deleteMany(scope(environment, filter)).exec();
      return result.deletedCount;
    },
  };
}

export type ScopedRepo<T extends EnvironmentScoped> = ReturnType<typeof scopedRepo<T>>;
