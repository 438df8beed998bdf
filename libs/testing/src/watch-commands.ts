import mongoose, { type Connection } from 'mongoose';

/** A connection that records every command it sends (the driver's command monitoring). */
export interface WatchedConnection {
  connection: Connection;
  /** The commands sent so far, in order; empty it (`length = 0`) to watch from a point on. */
  commands: Array<{ name: string; body: Record<string, unknown> }>;
  /** Whether the server is FerretDB, which reads a whole collection for `_id: {$in: …}`. */
  ferretDb: boolean;
  close(): Promise<void>;
}

/**
 * A second connection to a test database that reports every command it sends: a repository
 * given it shows which queries it makes, so a test can fail on a query shape that would read
 * many documents, without timing anything.
 */
export async function watchCommands(uri: string, dbName: string): Promise<WatchedConnection> {
  const connection = mongoose.createConnection(uri, { dbName, monitorCommands: true });
  await connection.asPromise();
  const ferretDb = 'ferretdbVersion' in (await connection.db!.admin().command({ buildInfo: 1 }));
  const commands: WatchedConnection['commands'] = [];
  connection.getClient().on('commandStarted', (event) => commands.push({ name: event.commandName, body: event.command as Record<string, unknown> }));
  return { connection, commands, ferretDb, close: () => connection.close() };
}
