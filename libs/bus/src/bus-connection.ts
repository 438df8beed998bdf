import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '@latchkey/logger';
import type { Bus } from './create-bus.js';
import type { BusObserver } from './observer.js';

export interface BusConnection {
  nc: NatsConnection;
  js: JetStreamClient;
  observer: BusObserver;
  /** How long JetStream setup steps retry while a cluster settles (`retryJetStreamSetup`). */
  setup: { logger: Logger; timeoutMs: number };
}

const connections = new WeakMap<Bus, BusConnection>();

/** Called once by createBus: the connection behind the bus it made. */
export function registerConnection(bus: Bus, connection: BusConnection): void {
  connections.set(bus, connection);
}

/**
 * The connection behind `bus`, for this library's own modules (consumers, KV, pull streams,
 * tests of the bus); it is not exported from the package.
 */
export function connectionOf(bus: Bus): BusConnection {
  const connection = connections.get(bus);
  if (!connection) throw new Error('not a bus made by createBus');
  return connection;
}
