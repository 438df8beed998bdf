import { Schema, type Connection } from 'mongoose';
import type { Operation, OperationStatus, OperationType, OperationView } from '@latchkey/contracts';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';

/**
 * The operations log of every environment (written from the OPERATIONS stream, read through
 * `GET /operations` and the operator API). The `_id` is `<environment id>:<operation id>`, and an
 * operation id starts with its start time (base 36, fixed width), so one environment's
 * operations, newest first, and any time range of them are an `_id` range: the one index a
 * MongoDB-wire server always has and that FerretDB uses (see docs/development.md).
 */
export interface OperationDoc extends Omit<Operation, 'id' | 'started_at'> {
  _id: string;
  started_at: Date;
}

const operationSchema = new Schema<OperationDoc>(
  {
    _id: { type: String, required: true },
    type: { type: String, required: true },
    environment_id: { type: String, required: true },
    status: { type: String, required: true },
    started_at: { type: Date, required: true },
    duration_ms: { type: Number, required: true },
    integration_id: String,
    connection_id: String,
    request_id: String,
    trace_id: String,
    error: { type: { code: String, message: String }, _id: false, default: undefined },
    proxy: { type: { method: String, path: String, upstream_status: Number }, _id: false, default: undefined },
  },
  { collection: 'operations', versionKey: false },
);
// For MongoDB's planner; the list itself reads an `_id` range (see above).
operationSchema.index({ environment_id: 1, started_at: -1, _id: -1 });

export const operationModel = (connection: Connection) => connection.model<OperationDoc>('Operation', operationSchema);

/** Width of the time prefix of operation ids (`newOperationId` in the bus). */
const TIME_WIDTH = 9;
const timeKey = (ms: number) => Math.max(0, Math.floor(ms)).toString(36).padStart(TIME_WIDTH, '0');
const keyOf = (environment: string, id: string) => `${environment}:${id}`;
/** `:` + 1: every key of an environment sorts below this. */
const endOf = (environment: string) => `${environment};`;

export interface OperationFilter {
  types?: readonly OperationType[];
  status?: OperationStatus;
  integration_id?: string;
  connection_id?: string;
  /** Started at or after. */
  from?: Date;
  /** Started before. */
  to?: Date;
  /** The id of the last operation of the previous page: this page starts below it. */
  cursor?: string;
}

export const operationQueries = {
  byId: (environment: EnvironmentId, id: string) => ({ _id: keyOf(environment, id) }),
  /**
   * A page of one environment, newest first: an `_id` range (the time range and the cursor
   * narrow it), with the other filters on what it holds.
   */
  list(environment: EnvironmentId, filter: OperationFilter) {
    let upper = endOf(environment);
    if (filter.to !== undefined) upper = keyOf(environment, timeKey(filter.to.getTime()));
    if (filter.cursor !== undefined && keyOf(environment, filter.cursor) < upper) upper = keyOf(environment, filter.cursor);
    const lower = filter.from === undefined ? keyOf(environment, '') : keyOf(environment, timeKey(filter.from.getTime()));
    return {
      _id: { $gte: lower, $lt: upper },
      ...(filter.types && filter.types.length > 0 ? { type: filter.types.length === 1 ? filter.types[0] : { $in: [...filter.types] } } : {}),
      ...(filter.status === undefined ? {} : { status: filter.status }),
      ...(filter.integration_id === undefined ? {} : { integration_id: filter.integration_id }),
      ...(filter.connection_id === undefined ? {} : { connection_id: filter.connection_id }),
    };
  },
};

function toView(doc: OperationDoc): OperationView {
  const { _id, environment_id: environment, started_at: startedAt, ...rest } = doc;
  const view: OperationView = { ...rest, id: _id.slice(environment.length + 1), started_at: startedAt.toISOString() };
  for (const key of Object.keys(view) as Array<keyof OperationView>) if (view[key] === null || view[key] === undefined) delete view[key];
  return view;
}

export function createOperationRepo(connection: Connection) {
  const model = operationModel(connection);
  const collection = model.collection;

  return {
    init: () => model.init(),
    /**
     * Stores a batch; an operation stored before (a batch delivered twice) is skipped, not an
     * error. Unordered, so one duplicate does not stop the rest.
     */
    async insert(operations: readonly Operation[]): Promise<void> {
      if (operations.length === 0) return;
      const docs = operations.map(({ id, started_at: startedAt, ...rest }) => ({ ...rest, _id: keyOf(rest.environment_id, id), started_at: new Date(startedAt) }));
      try {
        await collection.insertMany(docs as never[], { ordered: false });
      } catch (error) {
        const writeErrors = (error as { writeErrors?: unknown }).writeErrors;
        const errors = Array.isArray(writeErrors) ? writeErrors : writeErrors === undefined ? [error] : [writeErrors];
        if (!errors.every((each) => isDuplicateKey(each) || isDuplicateKey((each as { err?: unknown }).err))) throw error;
      }
    },
    /** Newest first; `limit` at most, and the cursor of the next page when there may be one. */
    async list(environment: EnvironmentId, filter: OperationFilter, limit: number): Promise<{ operations: OperationView[]; next_cursor: string | null }> {
      const docs = await model
        .find(operationQueries.list(environment, filter))
        .sort({ _id: -1 })
        .limit(limit + 1)
        .lean<OperationDoc[]>()
        .exec();
      const page = docs.slice(0, limit).map(toView);
      const last = page[page.length - 1];
      return { operations: page, next_cursor: docs.length > limit && last ? last.id : null };
    },
    async get(environment: EnvironmentId, id: string): Promise<OperationView | null> {
      const doc = await model.findOne(operationQueries.byId(environment, id)).lean<OperationDoc>().exec();
      return doc ? toView(doc) : null;
    },
    /**
     * Deletes an environment's operations started before `before`, and past its `maxKept`
     * newest. Idempotent and bounded by `_id` ranges, so replicas may sweep at the same time.
     * Returns how many went.
     */
    async sweep(environment: EnvironmentId, before: Date, maxKept: number): Promise<number> {
      const old = await model.deleteMany({ _id: { $gte: keyOf(environment, ''), $lt: keyOf(environment, timeKey(before.getTime())) } }).exec();
      const [oldestKept] = await model
        .find({ _id: { $gte: keyOf(environment, ''), $lt: endOf(environment) } }, { _id: 1 })
        .sort({ _id: -1 })
        .skip(maxKept - 1)
        .limit(1)
        .lean<Array<{ _id: string }>>()
        .exec();
      let over = 0;
      if (oldestKept) {
        const result = await model.deleteMany({ _id: { $gte: keyOf(environment, ''), $lt: oldestKept._id } }).exec();
        over = result.deletedCount;
      }
      return old.deletedCount + over;
    },
  };
}

export type OperationRepo = ReturnType<typeof createOperationRepo>;
