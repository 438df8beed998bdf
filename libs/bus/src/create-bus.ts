import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import {
  AuthorizationError,
  connect,
  createInbox,
  NoRespondersError,
  RequestError,
  TimeoutError,
  UserAuthenticationExpiredError,
  type ConnectionOptions,
  type Msg,
  type Subscription,
} from '@nats-io/transport-node';
import {
  inboxPrefixOf,
  type BroadcastContract,
  type EventContract,
  type JobContract,
  type PayloadOf,
  type RequestContract,
  type RequestOf,
  type ResponseOf,
} from '@latchkey/contracts';
import { AppError, toAppError, withRetries } from '@latchkey/errors';
import { runWithContext, type Logger } from '@latchkey/logger';
import { tracingEnabled } from '@latchkey/tracing';
import { batchedPublisher } from './batched-publish.js';
import { batchedRequester, callerWait, keepAlive, withinCallerBound } from './batched-request.js';
import { jetStreamPublisher, StreamFull } from './jetstream-publish.js';
import { registerConnection } from './bus-connection.js';
import { noObserver, secondsSince, type BusObserver } from './observer.js';
import { pullAllFrom, serveBytesOn } from './pull-stream.js';
import { decodeJsonOr, encodeJson, inMessageContext, inSendSpan, isInboxSubject, isStreamedReply, malformedReply, outgoingHeaders, parseOrThrow, requestIdOf, requestNotJson, safeParseJson, type Reply, type StreamedReply } from './wire.js';

export interface BusOptions {
  /** Comma-separated NATS URLs. */
  servers: string;
  /** The service name: the connection name and the default queue group. */
  service: string;
  /**
   * The NATS identity to connect as: a service's own user (its name) and password. NATS allows
   * it only the subjects its contracts name (`natsPermissions` in @latchkey/contracts), and its
   * inboxes live under its own prefix, which no other identity may subscribe to.
   */
  identity: NatsIdentity;
  logger: Logger;
  /** The deadline of a request and of JetStream API calls. */
  requestTimeoutMs: number;
  /**
   * How long in all a request on `requestTimeoutMs` waits while its server says it is still at
   * work (see `RequestOptions.upToMs`): 3 × `requestTimeoutMs` by default.
   */
  keepaliveUpToMs?: number;
  /**
   * The largest reply (encoded) this bus serves or reads; larger replies than one NATS message
   * travel as a pull stream, replies larger than this are a `payload_too_large` error.
   * 32 MiB by default.
   */
  maxReplyBytes?: number;
  /**
   * Copies of each JetStream stream and KV bucket this bus creates (`ensureStreams`, `openKv`):
   * 1 on a single NATS server (the default), 3 on a clustered one.
   */
  jetstreamReplicas?: number;
  /** Told of each request sent, request answered and JetStream message handled (metrics). */
  observer?: BusObserver;
  /**
   * How long creating streams and opening KV buckets (`ensureStreams`, `openKv`) keep retrying,
   * with back-off, while a clustered JetStream is still electing its leader or placing replicas;
   * 0 (the default): the first error is thrown.
   */
  jetstreamSetupTimeoutMs?: number;
  /**
   * Gives a coded error to a failure of the service's own dependencies, which would otherwise
   * leave a handler as `internal_error` (500, logged as a defect): the runtime maps its
   * database being unreachable to `service_unavailable` (503, retried by consumers).
   */
  classifyError?: (error: unknown) => AppError | undefined;
}

const DEFAULT_MAX_REPLY_BYTES = 32 * 1024 * 1024;
/** What the server allows in one message when it has not said (before the first INFO). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
/**
 * The one cut-off between a body that rides inside a message and one that streams (a pull
 * stream): at most 1 MiB, and 64 KiB under the server's max_payload, which leaves room for what
 * travels beside a body (the proxy's call metadata and headers, a reply's envelope).
 */
const INLINE_CEILING_BYTES = 1024 * 1024;
const INLINE_HEADROOM_BYTES = 64 * 1024;
/**
 * A subscription NATS refused is asked for again after this long, then twice as long each time
 * up to the ceiling (and at once after a reconnect): NATS reloads its authorization without
 * telling its clients, and an upgrade that adds a subject may reach NATS after the replicas.
 */
const RESUBSCRIBE_FIRST_DELAY_MS = 5_000;
const RESUBSCRIBE_MAX_DELAY_MS = 30_000;

export interface NatsIdentity {
  user: string;
  password: string;
}

export interface RequestOptions {
  /** How long the request waits for its answer, or for its server's next sign of life. */
  timeoutMs?: number;
  /**
   * How long in all it may wait while its server says, every third of `timeoutMs`, that it is
   * still at work on it: work that can outlast one deadline (a refresh waiting for a provider's
   * token endpoint, a JetStream election) answers what it did, rather than a 503 while it goes
   * on. A server that died or never took the request says nothing, and the request ends
   * `timeoutMs` after its last sign. Below `timeoutMs`, it is the request's deadline. A request
   * a handler makes waits on, past its timeout, no further than the handler's own caller does
   * (nor past `hurry`). Default: the bus's `keepaliveUpToMs` for a request on the bus's own
   * timeout; `timeoutMs` (no waiting past it) for a request that names its own.
   */
  upToMs?: number;
}

export interface PublishOptions {
  msgId?: string;
  /**
   * How long to keep trying while JetStream cannot be reached (a leader election, a restart),
   * for a fact whose loss nothing would repair (a deleted connection's records stay otherwise).
   * The tries share one `msgId` (one is made when none is given), so a try whose ack was lost
   * and a later one are stored once.
   */
  retryForMs?: number;
}

export interface ServeOptions {
  /** Queue group; defaults to the service name so replicas share the work. */
  queue?: string;
}

/** A message as `subscribeRaw` hands it over: bytes, with the subject to answer on, if any. */
export interface RawMessage {
  subject: string;
  reply: string | undefined;
  data: Uint8Array;
}

/** A subscription made through the bus, which makes it again while NATS refuses it. */
export interface BusSubscription {
  /** Stops taking messages once those already received are handed over. */
  drain(): Promise<void>;
  unsubscribe(): void;
}

/** A message received from a subscription (its subject names a `perCaller` request's caller). */
export type BusMessage = Msg;

/**
 * The one owner of a service's NATS connection: services (and the libraries above this one) go
 * through it and never hold the connection themselves.
 */
export interface Bus {
  readonly service: string;
  readonly requestTimeoutMs: number;
  /** How long in all a request on `requestTimeoutMs` waits while its server says it is at work. */
  readonly keepaliveUpToMs: number;
  /**
   * Bodies up to this many bytes travel inside a message; larger ones stream (`servePullStream`,
   * `serveBytes`). The one inline cut-off of every service, read from the server's max_payload.
   */
  readonly inlineLimit: number;
  /** The largest message the server takes (its max_payload), headers and protocol line included. */
  readonly maxPayload: number;
  /** Copies of each stream and KV bucket this bus creates. */
  readonly jetstreamReplicas: number;
  /** True while the connection to NATS is up. */
  isConnected(): boolean;
  /**
   * The subjects of subscriptions NATS refused (the identity may not read them: a permissions
   * file out of step with the code). Such a subscription delivers nothing, so a service is not
   * ready while there is one. Each is asked for again with back-off, and leaves this list once
   * NATS accepts it.
   */
  refusedSubscriptions(): readonly string[];
  /** The coded error a handler's failure leaves as (`classifyError` first, else `toAppError`). */
  toAppError(error: unknown): AppError;
  /**
   * Calls `listener` after each reconnection to NATS: what a replica heard while it was away
   * (cache invalidations, deletions) is lost, so caches kept in step by broadcasts start over.
   */
  onReconnect(listener: () => void): void;
  /** Asks the queue group behind `contract` and returns its validated answer, or throws its AppError. */
  request<C extends RequestContract>(contract: C, payload: RequestOf<C>, options?: RequestOptions): Promise<ResponseOf<C>>;
  /** Answers `contract` in this service's queue group. */
  serve<C extends RequestContract>(
    contract: C,
    handler: (payload: RequestOf<C>, msg: Msg) => Promise<ResponseOf<C>> | ResponseOf<C>,
    options?: ServeOptions,
  ): BusSubscription;
  /**
   * Publishes a fact on the EVENTS stream and waits for JetStream to store it. With `msgId`,
   * JetStream drops a second publish of the same id within its duplicate window.
   */
  publish<C extends EventContract>(contract: C, payload: PayloadOf<C>, options?: PublishOptions): Promise<void>;
  /** Puts work on the JOBS stream (deduplicated by `msgId` like `publish`). */
  enqueue<C extends JobContract>(contract: C, payload: PayloadOf<C>, options?: PublishOptions): Promise<void>;
  /** Tells every live replica (core NATS, best effort). */
  broadcast<C extends BroadcastContract>(contract: C, payload: PayloadOf<C>): void;
  onBroadcast<C extends BroadcastContract>(contract: C, handler: (payload: PayloadOf<C>) => void | Promise<void>): BusSubscription;
  /**
   * Hears the facts of `contract` live, as they are published (every replica hears each one,
   * best effort, no durable consumer): for what only matters while the process runs, such as
   * forgetting a cached entry. A payload that does not match its schema is skipped.
   */
  follow<C extends EventContract>(contract: C, handler: (payload: PayloadOf<C>) => void): void;
  /**
   * Sends bytes as they are, with an optional subject to answer on, for a wire of its own (the
   * proxy hop's frames) that contracts do not describe. Throws what NATS refuses (a message over
   * max_payload, a closed connection).
   */
  publishRaw(subject: string, data: Uint8Array, reply?: string): void;
  /** Receives bytes as they came, in a queue group when one is given (see `publishRaw`). */
  subscribeRaw(subject: string, handler: (message: RawMessage) => void, options?: { queue?: string }): BusSubscription;
  /** A fresh inbox subject under this identity's own prefix, which no other identity may read. */
  newInbox(): string;
  jetstreamManager(): Promise<JetStreamManager>;
  /** Resolves once the server has processed everything sent so far (subscriptions included). */
  flush(): Promise<void>;
  /**
   * Stops taking requests (`serve`) and waits for the handlers already running to answer;
   * requests made from here on, events, `subscribeRaw` and JetStream still work.
   * A service stops taking work so before it closes what its handlers use (an HTTP client, a
   * compiler, its operations log).
   */
  stopServing(): Promise<void>;
  /**
   * Waits past a request's timeout for a server at work no further than `withinMs` from now (see
   * `RequestOptions.upToMs`), in-flight requests included: called as the service begins to stop,
   * so what it is answering ends within its shutdown time.
   */
  hurry(withinMs: number): void;
  /** Stops taking messages (`stopServing` first, if not done), flushes, closes. */
  drain(): Promise<void>;
  /** Closes the connection at once, as a crash would: nothing is drained or finished. */
  close(): Promise<void>;
}

/** NATS refused the credentials (a wrong or rotated password, an expired user). */
const isRefusal = (error: Error) => error instanceof AuthorizationError || error instanceof UserAuthenticationExpiredError;

export async function createBus(options: BusOptions): Promise<Bus> {
  const { logger, service, requestTimeoutMs } = options;
  const keepaliveUpToMs = options.keepaliveUpToMs ?? 3 * requestTimeoutMs;
  const maxReplyBytes = options.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES;
  const connectionOptions: ConnectionOptions = {
    servers: options.servers.split(',').map((server) => server.trim()),
    name: `${service}-${randomUUID().slice(0, 8)}`,
    user: options.identity.user,
    pass: options.identity.password,
    inboxPrefix: inboxPrefixOf(options.identity.user),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    pingInterval: 10_000,
    // Every request would otherwise capture a stack trace in case it fails: a hot-path cost, and
    // a failed request is re-thrown as an AppError naming its subject anyway.
    noAsyncTraces: true,
  };
  const nc = await connect(connectionOptions);
  // At start, a password NATS refuses twice fails the start, loudly. Once connected, the client
  // would stop for good the same way, and the process live on, never ready, until restarted: a
  // password rotated on the server first, or a mistake put right, must find it still trying.
  // (The client reads its options as it goes; this is the object it was given.)
  (nc as unknown as { options: ConnectionOptions }).options.ignoreAuthErrorAbort = true;
  let connected = true;
  let refusals = 0;
  /** Subscriptions NATS refused and that are waiting for their next try; the service is not ready meanwhile. */
  const refused = new Set<RefusedSubscription>();
  const reconnectListeners: Array<() => void> = [];
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        connected = false;
        logger.warn('nats disconnected', { server: status.server });
      } else if (status.type === 'error' && isRefusal(status.error)) {
        // Said once per streak, then every 240th time (about a minute of retries); never the password.
        if (refusals++ % 240 === 0) logger.error('nats refused this service\'s credentials; retrying', { user: options.identity.user, error: status.error.name });
      } else if (status.type === 'reconnect') {
        refusals = 0;
        connected = true;
        logger.info('nats reconnected', { server: status.server });
        // The server may have come back with another authorization: ask again for what it refused.
        for (const subscription of refused) subscription.retryNow();
        for (const listener of reconnectListeners) {
          try {
            listener();
          } catch (error) {
            logger.error('a reconnect listener failed', { error });
          }
        }
      }
    }
  })();
  const maxPayload = () => nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  const js = jetstream(nc, { timeout: requestTimeoutMs });
  const stored = jetStreamPublisher(nc, requestTimeoutMs);
  // Requests and replies made in one event-loop turn leave in one socket write.
  const outgoing = batchedPublisher(nc);
  const { send, hurry } = batchedRequester(nc, outgoing);
  // Handlers are async: drain must wait for their replies, not only for callbacks to return.
  const served: BusSubscription[] = [];
  const inFlight = new Set<Promise<void>>();
  // A reply too large for one message is served from its own subscription after the handler
  // has answered: drain must wait until its caller has pulled it (or it is abandoned after its
  // idle timeout), or the caller's first pull finds no one and fails a request that already ran.
  const streaming = new Set<Promise<void>>();
  let servingStopped: Promise<void> | undefined;
  /** Drains the served subscriptions, then waits for their handlers' answers (once, however often asked). */
  const stopServing = () =>
    (servingStopped ??= (async () => {
      if (nc.isClosed()) return;
      await Promise.allSettled(served.map((subscription) => subscription.drain()));
      await Promise.allSettled([...inFlight]);
    })());
  const observer = options.observer ?? noObserver;
  const classify = options.classifyError;
  const appErrorOf = (error: unknown): AppError => (error instanceof AppError ? error : (classify?.(error) ?? toAppError(error)));

  function request<C extends RequestContract>(contract: C, payload: RequestOf<C>, requestOptions: RequestOptions = {}): Promise<ResponseOf<C>> {
    return tracingEnabled() ? inSendSpan(contract.subject, 'client', () => timedRequest(contract, payload, requestOptions)) : timedRequest(contract, payload, requestOptions);
  }

  /** The request, timed for the metrics (one observe, whatever the outcome). */
  async function timedRequest<C extends RequestContract>(contract: C, payload: RequestOf<C>, requestOptions: RequestOptions): Promise<ResponseOf<C>> {
    const start = performance.now();
    try {
      const answer = await requestOnce(contract, payload, requestOptions);
      observer.requested(contract.subject, secondsSince(start), undefined);
      return answer;
    } catch (error) {
      observer.requested(contract.subject, secondsSince(start), error instanceof AppError ? error.code : 'internal_error');
      throw error;
    }
  }

  async function requestOnce<C extends RequestContract>(contract: C, payload: RequestOf<C>, requestOptions: RequestOptions): Promise<ResponseOf<C>> {
    const body = parseOrThrow(contract.request, payload, `request to ${contract.subject}`);
    // Outside the try: a body that cannot be written (nested too deep) is not the bus being away.
    const data = encodeJson(body);
    let msg: Msg;
    try {
      const timeoutMs = requestOptions.timeoutMs ?? requestTimeoutMs;
      const upToMs = requestOptions.upToMs ?? (requestOptions.timeoutMs === undefined ? keepaliveUpToMs : timeoutMs);
      msg = await send(contract.perCaller ? `${contract.subject}.${options.identity.user}` : contract.subject, data, timeoutMs, upToMs);
    } catch (error) {
      throw unavailable(contract.subject, error);
    }
    let reply = decodeJsonOr(msg.data, malformedReply, contract.subject) as Reply<unknown> | StreamedReply | undefined;
    if (isStreamedReply(reply)) {
      if (reply.bytes > maxReplyBytes) throw new AppError('payload_too_large', `The answer of ${contract.subject} is larger than ${maxReplyBytes} bytes`);
      reply = decodeJsonOr(await pullAllFrom(nc, reply.stream, requestOptions.timeoutMs ?? requestTimeoutMs, maxReplyBytes), malformedReply, contract.subject) as Reply<unknown> | undefined;
    }
    if (reply === undefined || typeof reply !== 'object' || reply === null || !('ok' in reply)) throw malformedReply(contract.subject);
    if (!reply.ok) throw AppError.fromBody(reply.error);
    const parsed = contract.response.safeParse(reply.data);
    if (!parsed.success) {
      logger.error('reply does not match its contract', { subject: contract.subject, issues: parsed.error.issues });
      throw malformedReply(contract.subject);
    }
    return parsed.data as ResponseOf<C>;
  }

  function serve<C extends RequestContract>(
    contract: C,
    handler: (payload: RequestOf<C>, msg: Msg) => Promise<ResponseOf<C>> | ResponseOf<C>,
    serveOptions: ServeOptions = {},
  ): BusSubscription {
    const subscription = subscribe(contract.subject, contract.perCaller ? `${contract.subject}.*` : contract.subject, serveOptions.queue ?? service, (msg) => {
      const task = inMessageContext(msg.headers, contract.subject, 'server', () => answer(contract, handler, msg)).finally(() => inFlight.delete(task));
      inFlight.add(task);
    });
    served.push(subscription);
    return subscription;
  }

  async function answer<C extends RequestContract>(
    contract: C,
    handler: (payload: RequestOf<C>, msg: Msg) => Promise<ResponseOf<C>> | ResponseOf<C>,
    msg: Msg,
  ): Promise<void> {
    let reply: Reply<unknown>;
    const start = performance.now();
    // The caller's wait: while it outlasts the caller's timeout, the caller is told the handler
    // is at work; and what the handler asks of other services waits no longer than the caller.
    const inbox = msg.reply;
    const wait = callerWait(msg.headers, start);
    const keepalive = wait && isInboxSubject(inbox) ? keepAlive(wait, inbox, outgoing) : undefined;
    try {
      const payload = parseOrThrow(contract.request, decodeJsonOr(msg.data, requestNotJson, contract.subject), `request to ${contract.subject}`);
      const result = await (wait ? withinCallerBound(wait.untilAt, () => handler(payload as RequestOf<C>, msg)) : handler(payload as RequestOf<C>, msg));
      const checked = contract.response.safeParse(result);
      if (!checked.success) {
        logger.error('handler result does not match its contract', { subject: contract.subject, issues: checked.error.issues });
        throw new AppError('internal_error', 'An internal error occurred');
      }
      reply = { ok: true, data: checked.data };
    } catch (error) {
      const appError = appErrorOf(error);
      if (appError.code === 'internal_error') logger.error('handler failed', { subject: contract.subject, error: appError.cause ?? appError });
      reply = { ok: false, error: appError.toBody() };
    } finally {
      if (keepalive) clearInterval(keepalive);
    }
    observer.served(contract.subject, secondsSince(start), reply.ok ? undefined : reply.error.code);
    if (isInboxSubject(msg.reply)) sendReply(contract.subject, msg.reply, encodeJson(reply));
    else if (msg.reply) logger.warn('a request named a reply subject that is not an inbox: it was not answered', { subject: contract.subject });
  }

  /**
   * Every reply reaches its caller, whatever its size: within one message up to the inline
   * limit, else as a pull stream the caller reads (up to `maxReplyBytes`), else
   * as a `payload_too_large` error. A reply NATS still refuses becomes an error reply, so no
   * caller waits out its deadline for an answer that was dropped.
   */
  function sendReply(subject: string, inbox: string, encoded: Uint8Array): void {
    const fits = bus.inlineLimit;
    const failed = (error: AppError) => {
      try {
        nc.publish(inbox, encodeJson({ ok: false, error: error.toBody() } satisfies Reply<unknown>), { headers: outgoingHeaders() });
      } catch (publishError) {
        logger.error('could not send a reply', { subject, error: publishError });
      }
    };
    let message = encoded;
    if (encoded.length > maxReplyBytes) {
      logger.warn('a reply is larger than the bus carries', { subject, bytes: encoded.length, limit: maxReplyBytes });
      message = encodeJson({ ok: false, error: new AppError('payload_too_large', `The answer is larger than ${maxReplyBytes} bytes`).toBody() } satisfies Reply<unknown>);
    } else if (encoded.length > fits) {
      const { inbox: stream, done } = serveBytesOn(nc, encoded, { idleTimeoutMs: requestTimeoutMs });
      const pulled = done.catch(() => undefined).finally(() => streaming.delete(pulled));
      streaming.add(pulled);
      message = encodeJson({ stream, bytes: encoded.length } satisfies StreamedReply);
    }
    outgoing.publish(inbox, message, { headers: outgoingHeaders() }, (error) => {
      logger.error('a reply could not be sent', { subject, bytes: message.length, error });
      failed(new AppError('internal_error', 'The answer could not be sent'));
    });
  }

  async function publish<C extends EventContract | JobContract>(contract: C, payload: PayloadOf<C>, publishOptions: PublishOptions = {}): Promise<void> {
    const body = parseOrThrow(contract.payload, payload, `${contract.kind} ${contract.name}`);
    const { retryForMs } = publishOptions;
    const msgId = publishOptions.msgId ?? (retryForMs === undefined ? undefined : randomUUID());
    // Outside the try: a payload that cannot be written (nested too deep) is not JetStream being
    // away, to be retried as if it were.
    const data = encodeJson(body);
    const storeOnce = async () => {
      try {
        await stored.publish(contract.subject, data, outgoingHeaders(), msgId);
      } catch (error) {
        throw unavailable(contract.subject, error);
      }
    };
    const store =
      retryForMs === undefined
        ? storeOnce
        : () =>
            withRetries(storeOnce, {
              forMs: retryForMs,
              firstDelayMs: 250,
              maxDelayMs: 2_000,
              retryIf: (error) => error instanceof AppError && error.retryable,
              onRetry: (_error, tries) => {
                if (tries === 1) logger.warn('JetStream did not store a fact; trying again', { subject: contract.subject });
              },
            });
    await (tracingEnabled() ? inSendSpan(contract.subject, 'producer', store) : store());
  }

  function broadcast<C extends BroadcastContract>(contract: C, payload: PayloadOf<C>): void {
    const body = parseOrThrow(contract.payload, payload, `broadcast ${contract.subject}`);
    nc.publish(contract.subject, encodeJson(body), { headers: outgoingHeaders() });
  }

  /**
   * Every subscription of the bus: `natsSubject` (in `queue`, when given) handed to `onMessage`,
   * reported as `subject`. NATS answers a subscription it refuses with an error and drops it;
   * the bus asks again with back-off and after each reconnect, for an authorization reloaded
   * since (an upgrade that adds a subject) is never announced to the clients, and a replica
   * left refused would stay unready until someone restarted it.
   */
  function subscribe(subject: string, natsSubject: string, queue: string | undefined, onMessage: (msg: Msg) => void): BusSubscription {
    let current: Subscription;
    let ended = false;
    let trying = false;
    let timer: NodeJS.Timeout | undefined;
    let delayMs = RESUBSCRIBE_FIRST_DELAY_MS;
    const open = () => {
      current = nc.subscribe(natsSubject, {
        ...(queue === undefined ? {} : { queue }),
        callback: (error, msg) => (error ? wasRefused(error) : onMessage(msg)),
      });
    };
    const tryLater = () => {
      clearTimeout(timer);
      timer = setTimeout(() => void tryAgain(), delayMs).unref();
      delayMs = Math.min(delayMs * 2, RESUBSCRIBE_MAX_DELAY_MS);
    };
    const wasRefused = (error: Error) => {
      // Said once per streak of refusals, not at every try.
      if (!refused.has(entry)) logger.error('NATS refused a subscription; this service is not ready until it accepts it', { subject, error: error.message });
      refused.add(entry);
      if (!ended) tryLater();
    };
    const tryAgain = async () => {
      timer = undefined;
      // A reconnect asks again at once; a try in progress, or a connection away or closing, waits.
      if (trying || ended || !refused.has(entry) || !connected || nc.isClosed() || nc.isDraining()) return;
      trying = true;
      try {
        // A try whose answer was lost with the connection may stand: never subscribe twice.
        if (current.isClosed()) open();
        // The server answers a refusal before the flush's pong: a subscription still open now stands.
        await nc.flush();
        if (ended || current.isClosed()) return;
        refused.delete(entry);
        delayMs = RESUBSCRIBE_FIRST_DELAY_MS;
        logger.info('NATS accepted a subscription it had refused', { subject, still_refused: bus.refusedSubscriptions() });
      } catch {
        // The connection went away during the try: its reconnect asks again.
        if (refused.has(entry) && !ended) tryLater();
      } finally {
        trying = false;
      }
    };
    const entry: RefusedSubscription = {
      subject,
      retryNow: () => {
        clearTimeout(timer);
        void tryAgain();
      },
    };
    const end = () => {
      ended = true;
      clearTimeout(timer);
      // Given up by its owner: nothing is missing any more.
      refused.delete(entry);
    };
    open();
    return {
      drain: () => {
        end();
        return current.isClosed() ? Promise.resolve() : current.drain();
      },
      unsubscribe: () => {
        end();
        if (!current.isClosed()) current.unsubscribe();
      },
    };
  }

  // nats.js calls a subscription's callback from its read loop: an exception escaping one ends
  // the loop, and the connection reads nothing more (no reply, no message) until it reconnects,
  // 20 s or more later. So the callbacks below never throw.
  function onBroadcast<C extends BroadcastContract>(contract: C, handler: (payload: PayloadOf<C>) => void | Promise<void>): BusSubscription {
    return subscribe(contract.subject, contract.subject, undefined, (msg) => {
      const parsed = safeParseJson(contract.payload, msg.data);
      if (!parsed.success) {
        logger.warn('ignored a malformed broadcast', { subject: contract.subject });
        return;
      }
      void runWithContext({ requestId: requestIdOf(msg.headers) }, async () => {
        try {
          await handler(parsed.data as PayloadOf<C>);
        } catch (handlerError) {
          logger.error('broadcast handler failed', { subject: contract.subject, error: handlerError });
        }
      });
    });
  }

  function follow<C extends EventContract>(contract: C, handler: (payload: PayloadOf<C>) => void): void {
    subscribe(contract.subject, contract.subject, undefined, (msg) => {
      const parsed = safeParseJson(contract.payload, msg.data);
      if (!parsed.success) return;
      try {
        handler(parsed.data as PayloadOf<C>);
      } catch (handlerError) {
        logger.error('a follower of facts failed', { subject: contract.subject, error: handlerError });
      }
    });
  }

  function subscribeRaw(subject: string, handler: (message: RawMessage) => void, rawOptions: { queue?: string } = {}): BusSubscription {
    return subscribe(subject, subject, rawOptions.queue, (msg) => {
      try {
        handler({ subject: msg.subject, reply: msg.reply || undefined, data: msg.data });
      } catch (handlerError) {
        logger.error('a raw message handler failed', { subject: msg.subject, error: handlerError });
      }
    });
  }

  const bus: Bus = {
    service,
    requestTimeoutMs,
    keepaliveUpToMs,
    hurry,
    get inlineLimit() {
      return Math.min(INLINE_CEILING_BYTES, maxPayload() - INLINE_HEADROOM_BYTES);
    },
    get maxPayload() {
      return maxPayload();
    },
    jetstreamReplicas: options.jetstreamReplicas ?? 1,
    toAppError: appErrorOf,
    isConnected: () => connected && !nc.isClosed(),
    refusedSubscriptions: () => [...new Set([...refused].map((subscription) => subscription.subject))],
    onReconnect: (listener) => void reconnectListeners.push(listener),
    request,
    serve,
    publish,
    enqueue: publish,
    broadcast,
    onBroadcast,
    follow,
    publishRaw: (subject, data, reply) => nc.publish(subject, data, reply === undefined ? undefined : { reply }),
    subscribeRaw,
    newInbox: () => createInbox(connectionOptions.inboxPrefix),
    jetstreamManager: () => jetstreamManager(nc, { timeout: requestTimeoutMs }),
    flush: () => nc.flush(),
    close: () => nc.close(),
    stopServing,
    drain: async () => {
      if (nc.isClosed()) return;
      await stopServing();
      await Promise.allSettled([...inFlight]);
      // Sends the replies queued, those naming a stream among them, before waiting for their pulls.
      outgoing.flush();
      await Promise.allSettled([...streaming]);
      stored.flush();
      await nc.drain();
    },
  };
  registerConnection(bus, { nc, js, observer, setup: { logger, timeoutMs: options.jetstreamSetupTimeoutMs ?? 0 } });
  return bus;
}

/** A subscription NATS refused: what it is reported as, and how to ask for it again at once. */
interface RefusedSubscription {
  readonly subject: string;
  retryNow(): void;
}

/**
 * Who sent a request of a `perCaller` contract: the last token of the subject, which NATS lets
 * only that identity publish. Never take a caller from the payload.
 */
export function callerOf(contract: RequestContract, msg: Pick<Msg, 'subject'>): string {
  if (!contract.perCaller || !msg.subject.startsWith(`${contract.subject}.`)) {
    throw new AppError('internal_error', `${contract.subject} does not name its caller`);
  }
  return msg.subject.slice(contract.subject.length + 1);
}

/** A deadline passed, nobody answered, or NATS is away: the caller may retry later. */
export function unavailable(subject: string, error: unknown): AppError {
  if (error instanceof AppError) return error;
  // The client's own refusal of a message over the server's max_payload: no retry sends it.
  if (error instanceof Error && error.message.includes('max_payload size exceeded')) {
    return new AppError('payload_too_large', `${subject}: the message is larger than the message bus takes`, { cause: error });
  }
  // A bounded stream at its bound: nothing is wrong with the bus, and a retry waits for room.
  if (error instanceof StreamFull) {
    return new AppError('service_unavailable', `${subject}: ${error.message}; try again later`, { cause: error });
  }
  const reason =
    error instanceof NoRespondersError || (error instanceof RequestError && error.isNoResponders())
      ? 'no service is answering'
      : error instanceof TimeoutError || (error instanceof RequestError && error.cause instanceof TimeoutError)
        ? 'no answer within the deadline'
        : 'the message bus is unavailable';
  return new AppError('service_unavailable', `${subject}: ${reason}`, { cause: error });
}
