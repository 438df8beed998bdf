import { SpanKind, startSpan, type OpenSpan } from '@latchkey/tracing';

/** What the driver's command monitoring hands over (`monitorCommands: true`), as far as spans need. */
interface CommandEvent {
  requestId: number;
  commandName: string;
  databaseName?: string;
  command?: Record<string, unknown>;
  failure?: { name?: string; code?: unknown };
}

interface CommandEmitter {
  on(event: 'commandStarted' | 'commandSucceeded' | 'commandFailed', listener: (event: CommandEvent) => void): unknown;
}

/** Handshakes and authentication: not the service's own work, and the driver hides their bodies anyway. */
const SKIPPED = new Set(['hello', 'ismaster', 'isMaster', 'ping', 'saslStart', 'saslContinue', 'authenticate', 'buildInfo', 'endSessions']);

/**
 * A client span per database command, child of the span that issued it: named by the operation
 * and the collection (`find connections`), with `db.namespace`. Never the filter, the update or
 * the documents: the command's values are not read.
 */
export function traceCommands(client: CommandEmitter): void {
  const open = new Map<number, OpenSpan>();
  client.on('commandStarted', (event) => {
    if (SKIPPED.has(event.commandName)) return;
    const target = event.command?.[event.commandName];
    const collection = typeof target === 'string' ? target : undefined;
    const span = startSpan(collection === undefined ? event.commandName : `${event.commandName} ${collection}`, SpanKind.CLIENT, {
      'db.system.name': 'mongodb',
      'db.operation.name': event.commandName,
      ...(collection === undefined ? {} : { 'db.collection.name': collection }),
      ...(event.databaseName === undefined ? {} : { 'db.namespace': event.databaseName }),
    });
    if (span) open.set(event.requestId, span);
  });
  client.on('commandSucceeded', (event) => {
    open.get(event.requestId)?.end();
    open.delete(event.requestId);
  });
  client.on('commandFailed', (event) => {
    open.get(event.requestId)?.end(typeof event.failure?.code === 'number' ? `mongodb_${event.failure.code}` : (event.failure?.name ?? 'error'));
    open.delete(event.requestId);
  });
}
