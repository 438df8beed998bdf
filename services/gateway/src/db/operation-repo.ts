import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import { Schema, type Connection } from 'mongoose';
import { OPERATION_PAGE_BYTES_MAX, recordedOperations, type Operation, type OperationPage, type OperationRecorder, type OperationStatus, type OperationType, type OperationView } from '@latchkey/contracts';
import { isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);

/**
 * The operations log of every environment (written from the OPERATIONS stream, read through
 * `GET /operations` and the operator API), stored in pages: a page holds the operations that one
 * recorded batch (one OPERATIONS message) has for one environment and one second of start
 * times, as deflated JSON. A MongoDB-wire server's cost is per document and per field (FerretDB
 * turns each into SQL): one document per operation cost the database about 90 µs of CPU per
 * proxied call, a page about 1 µs (docs/decisions.md, "Operations log").
 *
 * The `_id` is `<environment>:<second>:<first operation id>`, the second in base 36, fixed width,
 * as operation ids begin: one environment's pages, newest first, and any time range of them are
 * an `_id` range, the one index a MongoDB-wire server always has. A page's `_id` depends only on
 * its message, so a message delivered twice makes the same pages, stored once.
 *
 * Recorders send their pages made and deflated (`OperationPage`): the bytes are stored as they
 * came, and each entry is checked when the page is read back, against the schema of the service
 * that sent it (`by`), the page's environment and its second. Entries that fail are left out of
 * every answer.
 */
export interface OperationPageDoc {
  _id: string;
  /** How many operations the page holds (the size bound counts them). */
  n: number;
  /**
   * The operations as deflated JSON: as the recorder sent them when `by` is set (checked as they
   * are read), else as the API shows them (checked before they were stored: lists of operations).
   */
  ops: Buffer;
  /** The service that recorded the page, when it came made. */
  by?: OperationRecorder;
}

const operationPageSchema = new Schema<OperationPageDoc>(
  {
    _id: { type: String, required: true },
    n: { type: Number, required: true },
    ops: { type: Buffer, required: true },
    by: { type: String, required: false },
  },
  { collection: 'operation_pages', versionKey: false },
);

export const operationPageModel = (connection: Connection) => connection.model<OperationPageDoc>('OperationPage', operationPageSchema);

/** Width of the time prefix of operation ids (`newOperationId` in the bus). */
const TIME_WIDTH = 9;
/** The start times one page spans. */
const PAGE_SPAN_MS = 1000;
const timeKey = (ms: number) => Math.max(0, Math.floor(ms)).toString(36).padStart(TIME_WIDTH, '0');
/** The second an operation's id says it started in, as a key. */
const secondOfMs = (ms: number) => timeKey(Math.floor(ms / PAGE_SPAN_MS) * PAGE_SPAN_MS);
const msOfId = (id: string) => parseInt(id.slice(0, TIME_WIDTH), 36);
const secondOfOperation = (operation: Pick<Operation, 'id' | 'started_at'>) => {
  const fromId = msOfId(operation.id);
  return secondOfMs(Number.isFinite(fromId) ? fromId : Date.parse(operation.started_at) || 0);
};
/**
 * The cursor of a page that stopped at a second's start (its read budget spent): below every id of
 * that second (`-` sorts before every other character ids use), above every id before it.
 */
const SECOND_START_SUFFIX = '-';
const belowSecond = (second: string) => `${second}${SECOND_START_SUFFIX}`;
/** Every page of an environment's second sorts from this ... */
const secondStart = (environment: string, second: string) => `${environment}:${second}:`;
/** ... to below this (`:` + 1). */
const secondEnd = (environment: string, second: string) => `${environment}:${second};`;
const environmentStart = (environment: string) => `${environment}:`;
const environmentEnd = (environment: string) => `${environment};`;
/** The second part of a page's `_id`. */
const secondOfPage = (environment: string, pageId: string) => pageId.slice(environment.length + 1, environment.length + 1 + TIME_WIDTH);

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

/** The operation ids a list admits: from `lower` (inclusive) to `upper` (exclusive), if set. */
function idBounds(filter: OperationFilter): { lower: string; upper: string | undefined } {
  let upper = filter.to === undefined ? undefined : timeKey(filter.to.getTime());
  if (filter.cursor !== undefined && (upper === undefined || filter.cursor < upper)) upper = filter.cursor;
  return { lower: filter.from === undefined ? '' : timeKey(filter.from.getTime()), upper };
}

export const operationQueries = {
  /** The pages that may hold operation `id`: those of its second. */
  byId: (environment: EnvironmentId, id: string) => {
    const second = secondOfMs(msOfId(id) || 0);
    return { _id: { $gte: secondStart(environment, second), $lt: secondEnd(environment, second) } };
  },
  /** The pages that may hold a list's operations: an `_id` range of the environment's seconds. */
  list(environment: EnvironmentId, filter: OperationFilter) {
    const { lower, upper } = idBounds(filter);
    return {
      _id: {
        $gte: lower === '' ? environmentStart(environment) : secondStart(environment, secondOfMs(msOfId(lower))),
        // Below a second's start, that second's pages hold nothing the list admits: they are not read.
        $lt:
          upper === undefined
            ? environmentEnd(environment)
            : upper === belowSecond(upper.slice(0, TIME_WIDTH))
              ? secondStart(environment, upper.slice(0, TIME_WIDTH))
              : secondEnd(environment, secondOfMs(msOfId(upper))),
      },
    };
  },
};

/** An operation as a page gives it: as the API shows it, without `environment_id` (the `_id` has it). */
type StoredOperation = OperationView;

/**
 * A page's operations as the API shows them. Those of a page its recorder made are checked here:
 * the recorder's schema (its own types only), the page's environment and its second; an entry
 * that fails is left out (`onInvalid` hears how many), and bytes that do not inflate (within
 * `OPERATION_PAGE_BYTES_MAX`) to JSON leave out the page.
 */
async function unpack(page: Pick<OperationPageDoc, '_id' | 'by'> & { ops: Buffer | { buffer: Uint8Array } }, environment: string, onInvalid: (count: number) => void): Promise<StoredOperation[]> {
  const bytes = Buffer.isBuffer(page.ops) ? page.ops : Buffer.from(page.ops.buffer);
  let entries: unknown;
  try {
    // Bounded: a page made elsewhere may inflate far beyond its size.
    entries = JSON.parse((await inflate(bytes, { maxOutputLength: OPERATION_PAGE_BYTES_MAX })).toString('utf8'));
  } catch {
    onInvalid(1);
    return [];
  }
  if (page.by === undefined) return entries as StoredOperation[];
  if (!Array.isArray(entries)) {
    onInvalid(1);
    return [];
  }
  const checker = recordedOperations[page.by];
  const second = secondOfPage(environment, page._id);
  const operations: StoredOperation[] = [];
  for (const entry of entries) {
    const checked = checker.safeParse(entry);
    if (checked.success && checked.data.environment_id === environment && secondOfMs(msOfId(checked.data.id)) === second) {
      const { environment_id: _environment, ...operation } = checked.data;
      operations.push(operation);
    }
  }
  if (operations.length < entries.length) onInvalid(entries.length - operations.length);
  return operations;
}

/** A recorded batch as the gateway stores it: pages made by the recorder, or a list of operations. */
export type RecordedBatch = { pages: readonly OperationPage[] } | { operations: readonly Operation[] };

function matches(operation: StoredOperation, filter: OperationFilter, bounds: { lower: string; upper: string | undefined }): boolean {
  return (
    operation.id >= bounds.lower &&
    (bounds.upper === undefined || operation.id < bounds.upper) &&
    (filter.types === undefined || filter.types.length === 0 || filter.types.includes(operation.type)) &&
    (filter.status === undefined || operation.status === filter.status) &&
    (filter.integration_id === undefined || operation.integration_id === filter.integration_id) &&
    (filter.connection_id === undefined || operation.connection_id === filter.connection_id)
  );
}

const newestFirst = (a: StoredOperation, b: StoredOperation) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

/** Pages read per round trip while listing. */
const PAGES_PER_READ = 16;
/** Operations one list reads at most (and the rest of the second it is in), however little its filter matches. */
const SCAN_BUDGET = 20_000;

/**
 * `onInvalid` hears of entries left out as they were read (a recorder that sent what its schema
 * does not admit): the gateway logs them. `scanBudget` replaces SCAN_BUDGET (tests).
 */
export function createOperationRepo(connection: Connection, options: { onInvalid?: (count: number) => void; scanBudget?: number } = {}) {
  const model = operationPageModel(connection);
  const onInvalid = options.onInvalid ?? (() => undefined);
  const scanBudget = options.scanBudget ?? SCAN_BUDGET;
  const collection = model.collection;

  return {
    init: () => model.init(),
    /**
     * Stores recorded batches (each one OPERATIONS message of `service`): its pages as they came,
     * or, for a list of operations, a page per environment and second of it. A batch stored
     * before (delivered twice) is skipped, not an error. Unordered, so one duplicate does not
     * stop the rest.
     */
    async insert(service: OperationRecorder, batches: readonly RecordedBatch[]): Promise<void> {
      // By `_id`: a message delivered twice in one call makes each of its pages once.
      const pages = new Map<string, { n: number; by?: OperationRecorder; ops: Buffer | string }>();
      for (const batch of batches) {
        if ('pages' in batch) {
          for (const { environment_id: environment, first_id: first, n, deflated } of batch.pages) {
            pages.set(`${secondStart(environment, secondOfMs(msOfId(first)))}${first}`, { n, by: service, ops: Buffer.from(deflated, 'base64') });
          }
          continue;
        }
        const ofBatch = new Map<string, { environment: string; second: string; operations: StoredOperation[] }>();
        for (const { environment_id: environment, ...operation } of batch.operations) {
          const second = secondOfOperation(operation);
          const key = `${environment}:${second}`;
          let group = ofBatch.get(key);
          if (!group) ofBatch.set(key, (group = { environment, second, operations: [] }));
          group.operations.push(operation);
        }
        for (const { environment, second, operations } of ofBatch.values()) {
          const first = operations.reduce((lowest, operation) => (operation.id < lowest ? operation.id : lowest), operations[0]!.id);
          pages.set(`${secondStart(environment, second)}${first}`, { n: operations.length, ops: JSON.stringify(operations) });
        }
      }
      if (pages.size === 0) return;
      const docs = await Promise.all(
        [...pages].map(async ([_id, { ops, ...page }]) => ({ _id, ...page, ops: typeof ops === 'string' ? await deflate(Buffer.from(ops), { level: 1 }) : ops })),
      );
      try {
        await collection.insertMany(docs as never[], { ordered: false });
      } catch (error) {
        const writeErrors = (error as { writeErrors?: unknown }).writeErrors;
        const errors = Array.isArray(writeErrors) ? writeErrors : writeErrors === undefined ? [error] : [writeErrors];
        if (!errors.every((each) => isDuplicateKey(each) || isDuplicateKey((each as { err?: unknown }).err))) throw error;
      }
    },
    /**
     * Newest first; `limit` at most, and the cursor of the next page when there may be one. Reads
     * pages newest first, a second at a time (a second's pages may come from several batches),
     * and filters what they hold, so memory holds one second's matches beyond the answer. Past
     * `scanBudget` operations read, it stops at the next second: a filter that matches little
     * answers fewer than `limit` (even none) and the cursor of that second's start, to go on.
     */
    async list(environment: EnvironmentId, filter: OperationFilter, limit: number): Promise<{ operations: OperationView[]; next_cursor: string | null }> {
      const bounds = idBounds(filter);
      const found: StoredOperation[] = [];
      let second: string | undefined;
      let ofSecond: StoredOperation[] = [];
      let scanned = 0;
      /** The second a spent budget stopped above: the next page starts below it. */
      let stoppedBelow: string | undefined;
      const settle = () => {
        found.push(...ofSecond.sort(newestFirst));
        ofSecond = [];
      };
      const pages = model.find(operationQueries.list(environment, filter)).sort({ _id: -1 }).lean<OperationPageDoc>().cursor({ batchSize: PAGES_PER_READ });
      try {
        for await (const page of pages) {
          const pageSecond = secondOfPage(environment, page._id);
          if (pageSecond !== second) {
            settle();
            if (found.length > limit) break;
            if (second !== undefined && scanned >= scanBudget) {
              stoppedBelow = second;
              break;
            }
            second = pageSecond;
          }
          scanned += page.n;
          for (const operation of await unpack(page, environment, onInvalid)) if (matches(operation, filter, bounds)) ofSecond.push(operation);
        }
      } finally {
        await pages.close();
      }
      settle();
      const page = found.slice(0, limit);
      const last = page[page.length - 1];
      if (found.length > limit && last) return { operations: page, next_cursor: last.id };
      return { operations: page, next_cursor: stoppedBelow === undefined ? null : belowSecond(stoppedBelow) };
    },
    async get(environment: EnvironmentId, id: string): Promise<OperationView | null> {
      const pages = await model.find(operationQueries.byId(environment, id)).lean<OperationPageDoc[]>().exec();
      for (const page of pages) {
        const operation = (await unpack(page, environment, onInvalid)).find((each) => each.id === id);
        if (operation) return operation;
      }
      return null;
    },
    /**
     * Deletes an environment's operations of seconds before `before`'s, and those of the
     * seconds past its `maxKept` newest operations (whole seconds: it keeps at least `maxKept`,
     * and at most a second's operations more). Idempotent and bounded by `_id` ranges, so replicas may sweep at the same time.
     * Returns how many operations went.
     */
    async sweep(environment: EnvironmentId, before: Date, maxKept: number): Promise<number> {
      const sizes = await model
        .find({ _id: { $gte: environmentStart(environment), $lt: environmentEnd(environment) } }, { n: 1 })
        .sort({ _id: -1 })
        .lean<Array<{ _id: string; n: number }>>()
        .exec();
      // Newest first, a second at a time: seconds are kept until the retention or the size
      // bound is reached; that second and every older one go.
      const oldestKept = secondOfMs(before.getTime());
      let kept = 0;
      let current: string | undefined;
      let cut: string | undefined;
      let deleted = 0;
      for (const { _id, n } of sizes) {
        const second = secondOfPage(environment, _id);
        if (cut === undefined && second !== current) {
          if (second < oldestKept || kept >= maxKept) cut = second;
          current = second;
        }
        if (cut === undefined) kept += n;
        else deleted += n;
      }
      if (cut === undefined) return 0;
      await model.deleteMany({ _id: { $gte: environmentStart(environment), $lt: secondEnd(environment, cut) } }).exec();
      return deleted;
    },
  };
}

export type OperationRepo = ReturnType<typeof createOperationRepo>;
