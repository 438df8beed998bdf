import mongoose, { type Connection } from 'mongoose';
import type { Logger } from '@latchkey/logger';

export interface MongoOptions {
  uri: string;
  /** The service's own database: no service reads another's. */
  dbName: string;
  logger: Logger;
  serverSelectionTimeoutMs?: number;
}

/**
 * One mongoose connection per service, on its own database. Unique indexes carry invariants
 * (no read-modify-write is trusted), so each repository awaits `model.init()`, which builds its
 * indexes, before the service reports ready.
 */
export async function connectMongo(options: MongoOptions): Promise<Connection> {
  const connection = mongoose.createConnection(options.uri, {
    dbName: options.dbName,
    serverSelectionTimeoutMS: options.serverSelectionTimeoutMs ?? 10_000,
    autoIndex: true,
    autoCreate: true,
  });
  connection.on('disconnected', () => options.logger.warn('mongodb disconnected', { db: options.dbName }));
  connection.on('reconnected', () => options.logger.info('mongodb reconnected', { db: options.dbName }));
  await connection.asPromise();
  return connection;
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
