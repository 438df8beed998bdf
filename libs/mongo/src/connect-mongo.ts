import mongoose, { type Connection, type mongo } from 'mongoose';
import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { tracingEnabled } from '@latchkey/tracing';
import { traceCommands } from './command-spans.js';

export interface MongoOptions {
  uri: string;
  /** The service's own database: no service reads another's. */
  dbName: string;
  logger: Logger;
  /**
   * How long an operation waits for a reachable server before it fails (10 s by default). A
   * service that must answer fast during an outage sets it short; the first connection at start
   * still waits up to STARTUP_WAIT_MS, retried, so a database that starts a little later is fine.
   */
  serverSelectionTimeoutMs?: number;
  /**
   * Whether operations issued while disconnected wait (up to 10 s) for the connection to come
   * back (the default), or fail at once with what the driver says.
   */
  bufferCommands?: boolean;
  /** How long the first connection keeps trying (10 s by default). */
  startupWaitMs?: number;
}

/** The first connection's patience, whatever the per-operation selection timeout. */
const STARTUP_WAIT_MS = 10_000;
/** The pause between two tries of the first connection: from the first to the longest. */
const RETRY_PAUSE_MS = { first: 100, longest: 2_000 };

/**
 * One mongoose connection per service, on its own database. Unique indexes carry invariants
 * (no read-modify-write is trusted), so each repository awaits `model.init()`, which builds its
 * indexes, before the service reports ready.
 */
export async function connectMongo(options: MongoOptions): Promise<Connection> {
  const deadline = Date.now() + (options.startupWaitMs ?? STARTUP_WAIT_MS);
  for (let pause = RETRY_PAUSE_MS.first; ; pause = Math.min(pause * 2, RETRY_PAUSE_MS.longest)) {
    const connection = mongoose.createConnection(options.uri, {
      dbName: options.dbName,
      serverSelectionTimeoutMS: options.serverSelectionTimeoutMs ?? STARTUP_WAIT_MS,
      bufferCommands: options.bufferCommands ?? true,
      autoIndex: true,
      autoCreate: true,
      // The driver reports each command only while tracing is on: a span per command.
      ...(tracingEnabled() ? { monitorCommands: true } : {}),
    });
    try {
      await connection.asPromise();
    } catch (error) {
      await connection.close().catch(() => undefined);
      // A refused password or a malformed URI will not mend by waiting: only an outage is retried,
      // after a pause, so a database refusing at once is not asked hundreds of times a second.
      const left = deadline - Date.now();
      if (!isMongoUnavailable(error) || left <= 0) throw error;
      options.logger.warn('mongodb not reachable yet; retrying', { db: options.dbName, retry_in_ms: Math.min(pause, left) });
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
      continue;
    }
    if (tracingEnabled()) traceCommands(connection.getClient());
    connection.on('disconnected', () => options.logger.warn('mongodb disconnected', { db: options.dbName }));
    connection.on('reconnected', () => options.logger.info('mongodb reconnected', { db: options.dbName }));
    return connection;
  }
}

/** What the driver throws when no server can be reached or a connection broke. */
const UNAVAILABLE = new Set([
  'MongoServerSelectionError',
  'MongooseServerSelectionError',
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoNotConnectedError',
  'MongoTopologyClosedError',
  'MongoPoolClearedError',
]);

/**
 * Socket failures the driver lets through unwrapped (a write to a connection the server just
 * closed surfaces as Node's own EPIPE error).
 */
const SOCKET_CODES = new Set(['EPIPE', 'ECONNRESET', 'ECONNREFUSED']);

/** Whether an error means the database is unreachable now (as opposed to a bad query). */
export function isMongoUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; typeof current === 'object' && current !== null && depth < 5; depth++) {
    const { name, code, cause, message } = current as { name?: unknown; code?: unknown; cause?: unknown; message?: unknown };
    if (typeof name === 'string' && UNAVAILABLE.has(name)) return true;
    if (typeof code === 'string' && SOCKET_CODES.has(code)) return true;
    // Mongoose's own: a command held while disconnected (bufferCommands) past its wait.
    if (name === 'MongooseError' && typeof message === 'string' && message.includes('buffering timed out')) return true;
    current = cause;
  }
  return false;
}

/**
 * The database unreachable, as the coded error a caller gets: 503 `service_unavailable`
 * (retryable: consumers try the message again later), not a 500 logged as a defect.
 */
export function databaseUnavailable(error: unknown, who = 'The service'): AppError | undefined {
  return isMongoUnavailable(error) ? new AppError('service_unavailable', `${who} cannot reach its database; retry shortly`, { cause: error }) : undefined;
}

const idListAnswers = new WeakMap<Connection, Promise<boolean>>();

/**
 * Whether the server answers `{_id: {$in: […]}}` from an index: MongoDB does; FerretDB 1.24
 * pushes down only `{_id: <string>}` and reads the whole collection for a list of ids. Asked
 * once per connection (again after a failed ask).
 */
export function idListsIndexed(connection: Connection): Promise<boolean> {
  let answer = idListAnswers.get(connection);
  if (!answer) {
    answer = connection
      .db!.admin()
      .command({ buildInfo: 1 })
      .then((info) => !('ferretdbVersion' in info));
    answer.catch(() => idListAnswers.delete(connection));
    idListAnswers.set(connection, answer);
  }
  return answer;
}

/**
 * Documents by `_id`, in the order asked (null where there is none): one `$in` where the server
 * answers it from an index (MongoDB), else one `{_id}` lookup each, `inFlight` at a time
 * (FerretDB reads the whole collection for a list of ids).
 */
export async function findByIds<T extends { _id: string }>(
  connection: Connection,
  collection: mongo.Collection<T>,
  ids: readonly string[],
  inFlight = ids.length,
  /** Only these fields (and `_id`) come back: what the caller reads of many documents, not all of each. */
  projection?: mongo.Document,
): Promise<Array<T | null>> {
  if (ids.length === 0) return [];
  const options = projection === undefined ? {} : { projection };
  if (await idListsIndexed(connection)) {
    const found = new Map<string, T>(((await collection.find({ _id: { $in: [...ids] } } as mongo.Filter<T>, options).toArray()) as T[]).map((doc) => [doc._id, doc]));
    return ids.map((id) => found.get(id) ?? null);
  }
  const docs: Array<T | null> = [];
  const step = Math.max(1, inFlight);
  for (let at = 0; at < ids.length; at += step) {
    docs.push(...(await Promise.all(ids.slice(at, at + step).map((id) => collection.findOne({ _id: id } as mongo.Filter<T>, options) as Promise<T | null>))));
  }
  return docs;
}

/** True while the driver holds a live connection. */
export function isMongoConnected(connection: Connection): boolean {
  return connection.readyState === mongoose.ConnectionStates.connected;
}

/**
 * A unique-index violation: code 11000 from MongoDB, and from FerretDB on inserts; FerretDB's
 * SQLite backend reports one on updates as an internal error naming the constraint.
 */
export function isDuplicateKey(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === 11000 || (typeof message === 'string' && /E11000|UNIQUE constraint failed|duplicate key/i.test(message));
}
