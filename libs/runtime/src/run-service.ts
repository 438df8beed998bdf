import { createServer, type RequestListener, type Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Connection } from 'mongoose';
import { createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { ping, type ServiceName } from '@latchkey/contracts';
import { createLogger, type Logger } from '@latchkey/logger';
import { answerScrape, busMetrics, collectProcessMetrics, isScrape } from '@latchkey/metrics';
import { startTracing } from '@latchkey/tracing';

/** What every service's config carries (see `baseServiceSchema` in @latchkey/config). */
export interface BaseConfig {
  NATS_URL: string;
  NATS_PASSWORD: string;
  LOG_LEVEL: string;
  REQUEST_TIMEOUT_MS: number;
  SHUTDOWN_TIMEOUT_MS: number;
  /** Port of the probe server (/health, /ready, /metrics); 0 turns it off. */
  HEALTH_PORT?: number;
  /** Copies of each JetStream stream and KV bucket the service creates (1 by default). */
  JETSTREAM_REPLICAS?: number;
  /** How long start waits for a clustered JetStream that is still electing its leader (0: not at all). */
  JETSTREAM_SETUP_TIMEOUT_MS?: number;
  /** The JOBS stream's bound in bytes (unset: the contracts' default). */
  JOBS_STREAM_MAX_BYTES?: number | undefined;
}

/** What the config of a service that keeps a database adds (every service but the proxy). */
export interface DatabaseConfig {
  MONGODB_URI: string;
  MONGODB_DB: string;
  /**
   * Set by a service that must fail fast while its database is unreachable: operations wait at
   * most this long for a server and are never buffered while disconnected.
   */
  MONGODB_SERVER_SELECTION_TIMEOUT_MS?: number;
}

/**
 * How long before `SHUTDOWN_TIMEOUT_MS` a stopping service stops waiting on another that says it
 * is at work, so the answer that depends on it still goes out (the runner hands runs back then too).
 */
const SHUTDOWN_ANSWER_MARGIN_MS = 3_000;

/** What a service is given to wire itself: the runtime of a service that keeps no database. */
export interface RuntimeWithoutDatabase {
  readonly service: ServiceName;
  readonly instance: string;
  readonly logger: Logger;
  readonly bus: Bus;
  /** Ready: started, subscribed, and connected to NATS (and MongoDB, with a database) right now. */
  isReady(): boolean;
  /**
   * Runs on shutdown, in reverse order of registration: after the requests the service had taken
   * (`bus.serve`) are answered, before NATS drains.
   */
  onShutdown(hook: () => Promise<void> | void): void;
  /**
   * Runs as shutdown begins, before the requests taken are waited for: for what makes long work
   * end in time (a run handed back past a deadline), not for closing what handlers use.
   */
  onStopping(hook: () => void): void;
  /**
   * Serves `handler` on `port` and returns the listening server. With the definition's
   * `httpPort`, that port has been answering the probes since the start: the server is handed
   * over, never closed and reopened, so the port stays open throughout.
   */
  serveHttp(handler: RequestListener, port: number): Promise<Server>;
}

/** The runtime of a service that keeps a database: its own MongoDB connection besides. */
export interface Runtime extends RuntimeWithoutDatabase {
  readonly mongo: Connection;
}

interface DefinitionBase {
  service: ServiceName;
  /** Exit the process on SIGTERM / SIGINT after shutting down (default true; tests pass false). */
  handleSignals?: boolean;
  /**
   * The port the service serves its own HTTP on (the gateway's PORT), when its probes live
   * there: bound at once, answering `/health` 200, `/ready` and `/ready/self` 503 while NATS,
   * JetStream and MongoDB are awaited, until `start` takes it over with `runtime.serveHttp`.
   */
  httpPort?: number;
}

/** A service with its own database: connected before `start`, and needed to be ready. */
export interface ServiceDefinition<C extends BaseConfig & DatabaseConfig, T> extends DefinitionBase {
  config: C;
  database?: true;
  /** Wires handlers, consumers and servers. The service is ready when this resolves. */
  start(runtime: Runtime, config: C): Promise<T>;
}

/**
 * A service that stores nothing (the proxy): it reads no MONGODB_* setting, holds no database
 * credential, never connects, and stays ready through a database outage.
 */
export interface ServiceDefinitionWithoutDatabase<C extends BaseConfig, T> extends DefinitionBase {
  config: C;
  database: false;
  /** Wires handlers, consumers and servers. The service is ready when this resolves. */
  start(runtime: RuntimeWithoutDatabase, config: C): Promise<T>;
}

export interface RunningService<T, R extends RuntimeWithoutDatabase = Runtime> {
  runtime: R;
  /** What `start` returned (a server address, for example). */
  started: T;
  /** Stops taking work, finishes in-flight work, drains NATS, closes MongoDB. */
  shutdown(): Promise<void>;
}

/**
 * The lifecycle every service shares: connect NATS and the service's own database (if it keeps
 * one), wire, answer `<service>.ping`, report ready; on SIGTERM or SIGINT stop taking work, let
 * in-flight work finish, drain NATS, close MongoDB and exit, or exit non-zero past
 * SHUTDOWN_TIMEOUT_MS.
 */
export function runService<C extends BaseConfig & DatabaseConfig, T>(definition: ServiceDefinition<C, T>): Promise<RunningService<T>>;
export function runService<C extends BaseConfig, T>(definition: ServiceDefinitionWithoutDatabase<C, T>): Promise<RunningService<T, RuntimeWithoutDatabase>>;
export function runService<C extends BaseConfig, T>(definition: AnyDefinition<C, T>): Promise<RunningService<T, RuntimeWithoutDatabase>> {
  return startService(definition);
}

/** Either kind of definition, as the two signatures of `runService` and `runMain` take them. */
type AnyDefinition<C extends BaseConfig, T> = ServiceDefinition<C & DatabaseConfig, T> | ServiceDefinitionWithoutDatabase<C, T>;

async function startService<C extends BaseConfig, T>(definition: AnyDefinition<C, T>): Promise<RunningService<T, RuntimeWithoutDatabase>> {
  const { service, config } = definition;
  // Only a service that keeps a database reads its settings: the proxy's config has none.
  const database = definition.database === false ? undefined : definition.config;
  const logger = createLogger({ service, level: config.LOG_LEVEL });
  const instance = randomUUID();
  // Before any connection, so the first message and query are traced (off without OTEL_* endpoint).
  const tracing = await startTracing({ service, instance });
  const startedAt = Date.now();
  const hooks: Array<() => Promise<void> | void> = [];
  const stoppingHooks: Array<() => void> = [];
  let ready = false;
  let stopping = false;

  collectProcessMetrics();
  logger.info('starting', {
    node: process.version,
    nats: redactUri(config.NATS_URL),
    ...(database ? { mongodb: redactUri(database.MONGODB_URI), db: database.MONGODB_DB } : { mongodb: 'none' }),
  });
  // The probes answer from the first moment: /ready says 503 while NATS, JetStream (a cluster
  // still electing its leader) and MongoDB are awaited below.
  let runtime: RuntimeWithoutDatabase | undefined;
  let probes: Server | undefined;
  if (config.HEALTH_PORT) probes = await startProbeServer(config.HEALTH_PORT, { isReady: () => runtime?.isReady() ?? false });
  let early = definition.httpPort === undefined ? undefined : await startProbeServer(definition.httpPort, { isReady: () => false }, { starting: true });
  // Mongoose and the driver load only where a database is kept: the proxy keeps none, and
  // starts without them (close to a second of CPU, and their memory, at each replica's start).
  const mongoLib = database ? await import('@latchkey/mongo') : undefined;
  const bus = await createBus({
    servers: config.NATS_URL,
    service,
    identity: { user: service, password: config.NATS_PASSWORD },
    logger,
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    observer: busMetrics(),
    // A handler that met the database away answers 503, and its message is tried again later.
    classifyError: (error) => mongoLib?.databaseUnavailable(error),
    ...(config.JETSTREAM_REPLICAS === undefined ? {} : { jetstreamReplicas: config.JETSTREAM_REPLICAS }),
    ...(config.JETSTREAM_SETUP_TIMEOUT_MS === undefined ? {} : { jetstreamSetupTimeoutMs: config.JETSTREAM_SETUP_TIMEOUT_MS }),
  });
  await ensureStreams(bus, config.JOBS_STREAM_MAX_BYTES === undefined ? {} : { jobsMaxBytes: config.JOBS_STREAM_MAX_BYTES });
  const failFast = database?.MONGODB_SERVER_SELECTION_TIMEOUT_MS;
  const mongo =
    database && mongoLib
      ? await mongoLib.connectMongo({
          uri: database.MONGODB_URI,
          dbName: database.MONGODB_DB,
          logger,
          ...(failFast === undefined ? {} : { serverSelectionTimeoutMs: failFast, bufferCommands: false }),
        })
      : undefined;

  runtime = {
    service,
    instance,
    logger,
    bus,
    ...(mongo ? { mongo } : {}),
    isReady: () => ready && !stopping && bus.isConnected() && bus.refusedSubscriptions().length === 0 && (mongo === undefined || mongoLib?.isMongoConnected(mongo) === true),
    onShutdown: (hook) => hooks.push(hook),
    onStopping: (hook) => stoppingHooks.push(hook),
    async serveHttp(handler, port) {
      if (early) {
        const server = early;
        early = undefined;
        server.removeAllListeners('request');
        server.on('request', handler);
        return server;
      }
      const server = createServer(handler);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, resolve);
      });
      return server;
    },
  };

  // Each definition is handed the runtime its kind declares: `mongo` is there when `database` is.
  const started = await definition.start(runtime as Runtime, config as C & DatabaseConfig);
  bus.serve(ping[service], () => ({ service, instance, uptime_ms: Date.now() - startedAt }));
  // Ready means subscribed: wait until the server has every subscription made above.
  await bus.flush();
  ready = true;
  logger.info('ready', { instance, ...(config.HEALTH_PORT ? { health_port: config.HEALTH_PORT } : {}) });

  let stopped: Promise<void> | undefined;
  // Where the shutdown is, for the log line of a deadline that passes.
  let step = 'answering the requests taken';
  const shutdown = () =>
    (stopped ??= (async () => {
      stopping = true;
      // What this service waits for from others must end within its shutdown time too.
      bus.hurry(Math.max(0, config.SHUTDOWN_TIMEOUT_MS - SHUTDOWN_ANSWER_MARGIN_MS));
      for (const hook of stoppingHooks) hook();
      // Requests already taken are answered before the hooks close what their handlers use: a
      // token request a provider has received must not lose its HTTP client, nor a finished
      // handler its operations log.
      await bus.stopServing();
      step = 'running the shutdown hooks';
      for (const hook of [...hooks].reverse()) await hook();
      step = 'draining NATS';
      await bus.drain();
      step = 'closing MongoDB';
      await mongo?.close();
      step = 'closing the probe port';
      await new Promise<void>((resolve) => (probes ? probes.close(() => resolve()) : resolve()));
      await new Promise<void>((resolve) => (early ? early.close(() => resolve()) : resolve()));
      step = 'exporting the last spans';
      await tracing.shutdown().catch((error: unknown) => logger.warn('could not export the last spans', { error }));
      logger.info('stopped');
    })());

  if (definition.handleSignals !== false) {
    const onSignal = (signal: string) => {
      logger.info('stopping', { signal });
      const deadline = setTimeout(() => {
        logger.error('shutdown deadline passed; exiting', { timeout_ms: config.SHUTDOWN_TIMEOUT_MS, step });
        process.exit(1);
      }, config.SHUTDOWN_TIMEOUT_MS);
      deadline.unref();
      shutdown().then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error('shutdown failed', { error });
          process.exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    process.on('unhandledRejection', (reason) => logger.error('unhandled rejection', { error: reason }));
  }
  return { runtime, started, shutdown };
}

/**
 * A service's entry point: `runService`, with the two ways a process ends unasked said as one
 * JSON line, as every other line the service writes, before it exits 1: a start that fails (a
 * port taken, a database that refuses the login, a settings key the stored settings need and
 * the configuration lacks), and, once running, a throw no code caught (in a callback), which
 * Node would print as a bare stack trace. Tests call `runService` itself, which throws instead.
 */
export function runMain<C extends BaseConfig & DatabaseConfig, T>(definition: ServiceDefinition<C, T>): Promise<RunningService<T>>;
export function runMain<C extends BaseConfig, T>(definition: ServiceDefinitionWithoutDatabase<C, T>): Promise<RunningService<T, RuntimeWithoutDatabase>>;
export async function runMain<C extends BaseConfig, T>(definition: AnyDefinition<C, T>): Promise<RunningService<T, RuntimeWithoutDatabase>> {
  const logger = createLogger({ service: definition.service, level: definition.config.LOG_LEVEL });
  let failing = false;
  const fail = (message: string, error: unknown) => {
    if (failing) return;
    failing = true;
    logger.error(message, { error });
    // Exit once the line is out; connections and timers must not hold the process.
    const exit = () => process.exit(1);
    logger.once('finish', exit);
    logger.end();
    setTimeout(exit, 1_000);
  };
  process.on('uncaughtException', (error) => fail('uncaught exception; exiting', error));
  try {
    return await startService(definition);
  } catch (error) {
    fail('could not start', error);
    return new Promise<never>(() => undefined);
  }
}

/**
 * /health answers while the process lives; /ready (and /ready/self) only while the service can
 * do its work; /metrics is the Prometheus scrape (never behind a key: the probe port stays in
 * the cluster).
 */
async function startProbeServer(port: number, runtime: Pick<Runtime, 'isReady'>, options: { starting?: boolean } = {}): Promise<Server> {
  const server = createServer((req, res) => {
    if (!options.starting && isScrape(req)) return answerScrape(res);
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: object) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/health') send(200, { status: 'ok' });
    // Here both say this process alone; /ready/self is the gateway's name for it (its own /ready
    // also asks every service), answered from the start as its /ready is.
    else if (path === '/ready' || path === '/ready/self') send(runtime.isReady() ? 200 : 503, { status: runtime.isReady() ? 'ready' : 'not_ready' });
    // On a service's own port before it is wired, every other route is "not yet".
    else if (options.starting) send(503, { error: { code: 'service_unavailable', message: 'Starting; try again shortly' } });
    else send(404, { error: { code: 'route_not_found', message: 'Not found' } });
  });
  // Scrapers and probers keep their connection open between calls; as on the gateway, the server
  // keeps it longer than they do, so a call never races the server closing the connection.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, resolve);
  });
  return server;
}

/** Query options whose values are secrets: proxyPassword, tlsCertificateKeyFilePassword, authMechanismProperties (AWS session tokens). */
const SECRET_OPTION = /pass|secret|token|cred|properties/i;

/**
 * Connection strings may hold passwords: log hosts, path and harmless options only. A list (a
 * NATS cluster) may carry one in each of its URLs, so every one is hidden: from `//` to the first
 * `@`, as the MongoDB driver reads a password (which may hold a `/`, `,`, `?` or a space), and on
 * past any `@` that follows before a `/`, `,`, `?` or space (an `@` in a password, as a URL
 * parser reads one). So are the values of options that carry secrets. Exported for its test.
 */
export function redactUri(uri: string): string {
  return uri
    .replace(/\/\/[^@]*@(?:[^@/,?\s]*@)*/g, '//***@')
    .replace(/([?&])([^=&]*)=([^&]*)/g, (option, separator: string, name: string) => (SECRET_OPTION.test(name) ? `${separator}${name}=***` : option));
}
