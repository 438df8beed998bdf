import { AckPolicy, DeliverPolicy, JetStreamApiError, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { givenUpContractOf, type EventContract, type GivenUpMessage, type JobContract, type PayloadOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { connectionOf } from './bus-connection.js';
import type { Bus } from './create-bus.js';
import { retryJetStreamSetup } from './jetstream-setup.js';
import { secondsSince } from './observer.js';
import { inMessageContext, safeParseJson } from './wire.js';

/** A message of a durable consumer, as a `consume` handler gets it (its headers, its delivery info). */
export type JobMessage = JsMsg;

export interface ConsumeOptions<C extends EventContract | JobContract> {
  bus: Bus;
  logger: Logger;
  stream: string;
  /** Durable name: replicas with the same name share the work, each message handled once. */
  durable: string;
  contract: C;
  /** How many messages one replica handles at a time. */
  concurrency: number;
  /**
   * Messages delivered and not yet acked, those waiting out a retry delay included; past it the
   * consumer gets nothing new. Defaults to four times the concurrency (at least 16).
   */
  maxAckPending?: number;
  /**
   * Where a new durable starts: every stored message (default; jobs), or only those published
   * from now on (facts a service begins to follow, which must not replay the stream's history).
   */
  deliverPolicy?: 'all' | 'new';
  /** How long a handler may hold a message before JetStream redelivers it. */
  ackWaitMs?: number;
  /**
   * While a handler runs, tell JetStream every this often that it is still working on the
   * message, so that only the messages of a replica that died are delivered again, however long
   * the work takes. Pick it well under `ackWaitMs`; a third of it by default, so no handler
   * (an event that touches every connection, say) runs past the ack wait and again beside itself.
   */
  heartbeatMs?: number;
  /** Delay before a retryable failure is delivered again. */
  retryDelayMs?: (deliveryCount: number) => number;
  /**
   * Deliveries after which a message that still fails is given up (terminated and recorded as
   * `message.given_up`), however retryable its error: a message that always fails must not come
   * back for days. Default 20, which the default back-off spreads over about a quarter of an
   * hour. A consumer that schedules retries itself (`{ retryInMs }`) counts those deliveries too:
   * asking for a message again at its last delivery gives it up. A fraction counts as the next
   * whole delivery (a cap computed from hours, say).
   */
  maxDeliveries?: number;
  /**
   * How long `stop()` lets the handlers in flight finish before it asks them to hand their
   * messages back, by aborting the `signal` each handler is given. A handler that fails once its
   * signal is aborted has its message nak'ed at once, for another replica to take now: not a
   * failure (no retry delay, never given up). One still busy `HAND_BACK_WAIT_MS` later (stuck in
   * a call the signal does not stop) has its message nak'ed without it, and whatever it does
   * after is not acknowledged: `stop()` takes at most `handBackAfterMs` + `HAND_BACK_WAIT_MS`.
   * 0 asks at once, for work that resumes where it stopped (a sync run from its checkpoint);
   * absent, `stop()` waits for every handler however long it takes (short work).
   */
  handBackAfterMs?: number;
  /**
   * Must be idempotent: JetStream delivers at least once. Returning `{ retryInMs }` asks for the
   * message again after that delay (a retry the handler scheduled itself, e.g. from Retry-After).
   * `signal` is aborted when the stopping consumer wants the message back (`handBackAfterMs`).
   */
  handler: (payload: PayloadOf<C>, msg: JsMsg, signal: AbortSignal) => Promise<void | { retryInMs: number }>;
}

export interface RunningConsumer {
  /**
   * Stops fetching and waits for the messages in hand: finished, or handed back once
   * `handBackAfterMs` has passed.
   */
  stop(): Promise<void>;
}

const defaultDelay = (deliveryCount: number) => Math.min(60_000, 1000 * 2 ** Math.min(deliveryCount - 1, 6));
export const DEFAULT_MAX_DELIVERIES = 20;
/**
 * `maxDeliveries` for a message whose loss nothing would repair, and that an outage of a
 * dependency (a vault or database away for an hour) must not cost: an inbound webhook the
 * gateway has answered, a connection's creation or deletion. A day at the default back-off,
 * which delivers it once a minute from its eighth try.
 */
export const DAY_OF_DELIVERIES = 24 * 60;
/** How long a message may be held unacked before JetStream delivers it again, unless `ackWaitMs` says. */
export const DEFAULT_ACK_WAIT_MS = 30_000;

/** How a consumer settles a message it cannot finish: retry later, or give up and say so. */
export interface Settler {
  /** A payload that failed its schema: no delivery can fix it. */
  malformed(msg: JsMsg): void;
  failed(msg: JsMsg, error: unknown): void;
  /** The handler asked for the message again after `delayMs` (`{ retryInMs }`): a failure that asks its own delay. */
  retryLater(msg: JsMsg, delayMs: number): void;
}

/** The deliveries after which a message that still fails is given up: `maxDeliveries`, a whole number. */
export function deliveryCapOf(options: Pick<ConsumeOptions<EventContract | JobContract>, 'maxDeliveries'>): number {
  return Math.ceil(options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES);
}

/**
 * The settler of one consumer. A retryable error under the cap is nak'ed with a delay;
 * anything else is terminated, logged and recorded as a `message.given_up` event, so an
 * operator can list what was dropped and why (never the payload: it may hold secrets).
 */
export function settlerFor(
  options: Pick<ConsumeOptions<EventContract | JobContract>, 'bus' | 'logger' | 'stream' | 'durable' | 'retryDelayMs' | 'maxDeliveries'>,
): Settler {
  const { bus, logger, stream, durable } = options;
  const delayOf = options.retryDelayMs ?? defaultDelay;
  const cap = deliveryCapOf(options);
  const giveUp = (msg: JsMsg, reason: GivenUpMessage['reason'], error: AppError) => {
    msg.term();
    logger.error('gave up on a message', { subject: msg.subject, seq: msg.seq, deliveries: msg.info.deliveryCount, reason, code: error.code, error: error.cause ?? error });
    const record: GivenUpMessage = {
      service: bus.service,
      stream,
      durable,
      subject: msg.subject,
      stream_seq: msg.seq,
      deliveries: msg.info.deliveryCount,
      reason,
      error: { code: error.code, message: error.message },
      at: new Date().toISOString(),
    };
    // Once per message and delivery: a record published twice is dropped by JetStream.
    bus.publish(givenUpContractOf(bus.service), record, { msgId: `given-up-${stream}-${durable}-${msg.seq}` }).catch((publishError: unknown) => {
      logger.warn('could not record a message given up', { subject: msg.subject, seq: msg.seq, error: publishError });
    });
  };
  return {
    malformed: (msg) => giveUp(msg, 'malformed', new AppError('invalid_body', 'The message does not match its contract')),
    failed: (msg, error) => {
      const appError = bus.toAppError(error);
      if (!appError.retryable) return giveUp(msg, 'final_error', appError);
      if (msg.info.deliveryCount >= cap) return giveUp(msg, 'delivery_cap', appError);
      msg.nak(delayOf(msg.info.deliveryCount));
    },
    // Asked for again at its last delivery, a message is given up as a failure would be (logged
    // and recorded): JetStream would deliver it a few times more, then stop without a word.
    retryLater: (msg, delayMs) => {
      if (msg.info.deliveryCount >= cap) {
        return giveUp(msg, 'delivery_cap', new AppError('service_unavailable', 'The handler asked for the message again after its last delivery'));
      }
      msg.nak(Math.max(0, Math.round(delayMs)));
    },
  };
}

/**
 * How long one pull waits for messages before it is asked again, and how often the server says
 * it still holds the pull. The client gives a pull up when two of those heartbeats do not come;
 * the server may still deliver into it, and what it delivers there waits out its ack wait. A
 * server starved of CPU sends them seconds late: with 2.5 s heartbeats a loaded router gave
 * its delivery pulls up again and again, and deliveries came back ten times before one ran.
 * Ten seconds of silence is still a lost pull soon enough when the consumer's leader moves to
 * another node. A message is handed over as soon as it arrives, and a pull for a full queue
 * ends when it is filled, so the long expiry delays nothing.
 */
export const FETCH_EXPIRES_MS = 30_000;
export const FETCH_HEARTBEAT_MS = 5_000;
/** How long handlers asked to hand back have to stop before their messages are handed back without them. */
export const HAND_BACK_WAIT_MS = 1_000;

/**
 * Runs a durable pull consumer with explicit acks: success acks, a retryable AppError naks with
 * a delay, anything else (and a payload that fails its schema) is terminated and logged.
 *
 * It pulls only as many messages as it has free slots, so every message it holds is running and
 * kept alive by its heartbeat: none waits in a client-side buffer past its ack wait (JetStream
 * would hand it to another replica while this one still meant to run it: the same job twice),
 * and a busy replica never hoards work an idle one could take.
 */
export async function consume<C extends EventContract | JobContract>(options: ConsumeOptions<C>): Promise<RunningConsumer> {
  const { logger, contract, concurrency, handler } = options;
  const consumer = await durableConsumer(options, options.maxAckPending ?? Math.max(concurrency * 4, 16));
  const inFlight = new Set<Promise<void>>();
  const settle = settlerFor(options);
  const { observer } = connectionOf(options.bus);
  const heartbeatMs = options.heartbeatMs ?? Math.floor((options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS) / 3);
  // Pull again once a quarter of the slots are free, not for each one: a pull is a round trip.
  const pullAt = Math.max(1, Math.floor(concurrency / 4));
  // One for every handler of this consumer: aborted when the stopping consumer wants its messages back.
  const handingBack = new AbortController();
  /** The messages being handled, each with the way to hand it back without waiting for its handler. */
  const holding = new Map<JsMsg, () => void>();

  async function handle(msg: JsMsg): Promise<void> {
    // Bytes that are not even JSON are as malformed as a payload that breaks its schema.
    const parsed = safeParseJson(contract.payload, msg.data);
    if (!parsed.success) {
      settle.malformed(msg);
      return;
    }
    const heartbeat = setInterval(() => msg.working(), heartbeatMs);
    const start = performance.now();
    // Acked, nak'ed or terminated once: by the handler's outcome, or handed back first.
    let settled = false;
    const handBack = () => {
      if (settled) return;
      settled = true;
      clearInterval(heartbeat);
      observer.consumed(contract.subject, secondsSince(start), 'handed_back');
      logger.info('handed a message back', { subject: msg.subject, seq: msg.seq, deliveries: msg.info.deliveryCount });
      msg.nak();
    };
    holding.set(msg, handBack);
    try {
      const outcome = await handler(parsed.data as PayloadOf<C>, msg, handingBack.signal);
      if (settled) return;
      settled = true;
      observer.consumed(contract.subject, secondsSince(start), outcome ? 'retry_later' : undefined);
      if (outcome) settle.retryLater(msg, outcome.retryInMs);
      else msg.ack();
    } catch (error) {
      // Given up because the consumer stops: another replica takes it now, from where it resumes.
      if (handingBack.signal.aborted) return handBack();
      if (settled) return;
      settled = true;
      observer.consumed(contract.subject, secondsSince(start), options.bus.toAppError(error).code);
      settle.failed(msg, error);
    } finally {
      clearInterval(heartbeat);
      holding.delete(msg);
    }
  }

  let stopping = false;
  let pulling: Awaited<ReturnType<typeof consumer.fetch>> | undefined;
  const loop = (async () => {
    let failures = 0;
    while (!stopping) {
      const free = concurrency - inFlight.size;
      if (free < pullAt) {
        await Promise.race(inFlight);
        continue;
      }
      try {
        pulling = await consumer.fetch({ max_messages: free, expires: FETCH_EXPIRES_MS, idle_heartbeat: FETCH_HEARTBEAT_MS });
        // Stopped while the pull was being set up (right after start): stop() found none to end.
        if (stopping) pulling.stop();
        for await (const msg of pulling) {
          // Delivered as the consumer stops: back to JetStream at once, for another replica.
          if (stopping) {
            msg.nak();
            continue;
          }
          const task = inMessageContext(msg.headers, contract.subject, 'consumer', () => handle(msg)).finally(() => inFlight.delete(task));
          inFlight.add(task);
        }
        failures = 0;
      } catch (error) {
        if (stopping) break;
        // NATS away, a node lost, the consumer moving: ask again with back-off.
        failures += 1;
        if (failures === 1 || failures % 10 === 0) logger.warn('could not pull messages; retrying', { durable: options.durable, failures, error });
        await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** Math.min(failures, 6))));
      } finally {
        pulling = undefined;
      }
    }
  })();

  return {
    stop: async () => {
      stopping = true;
      pulling?.stop();
      const { handBackAfterMs } = options;
      let timer: NodeJS.Timeout | undefined;
      // Resolves once every message still held was handed back without its handler.
      const forced = new Promise<void>((resolve) => {
        if (handBackAfterMs === undefined) return;
        timer = setTimeout(() => {
          handingBack.abort(new AppError('service_unavailable', 'This replica is stopping: the message goes back to another'));
          timer = setTimeout(() => {
            if (holding.size > 0) logger.warn('handed back messages whose handlers did not stop in time', { durable: options.durable, messages: holding.size });
            for (const handBack of [...holding.values()]) handBack();
            resolve();
          }, HAND_BACK_WAIT_MS);
        }, handBackAfterMs);
      });
      const finished = (async () => {
        await loop.catch(() => undefined);
        await Promise.allSettled(inFlight);
      })();
      await Promise.race([finished, forced]);
      clearTimeout(timer);
    },
  };
}

/** JetStream's answer to creating a durable that exists with other settings (since NATS 2.10). */
const CONSUMER_EXISTS = 10148;

/**
 * Creates (or updates) the durable pull consumer of `options` and returns it, waiting
 * (`retryJetStreamSetup`) while a clustered JetStream settles.
 *
 * A durable that exists with other settings (the ack wait, the cap or the messages pending came
 * from configuration or a default that changed) is updated to these: since 2.10 NATS refuses to
 * create it again, and every replica would fail its start until an operator deleted the durable
 * (and its position). Where it started (`deliverPolicy`) stays, as the server cannot change it.
 * During a rolling upgrade, replicas of both releases update it as each starts: the last one
 * started sets the durable they share. A message is then held or capped by either release's
 * settings for a while, which both tolerate; the settler's cap is each replica's own.
 */
export async function durableConsumer(
  options: Pick<ConsumeOptions<EventContract | JobContract>, 'bus' | 'stream' | 'durable' | 'contract' | 'deliverPolicy' | 'ackWaitMs' | 'maxDeliveries'>,
  maxAckPending: number,
) {
  const { bus, stream, durable, contract } = options;
  // What the server stores as integers: a fraction (a cap computed from hours, 1.1 × 3600) is
  // refused as invalid JSON. Counts round up; the ack wait in nanoseconds too.
  const changeable = {
    filter_subject: contract.subject,
    max_ack_pending: Math.ceil(maxAckPending),
    ack_wait: Math.ceil(nanos(options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS)),
    // The server's own cap, past the settler's: a message that takes its process down every
    // time it is handled is never settled by us, and must still stop coming back.
    max_deliver: deliveryCapOf(options) + 5,
  };
  return retryJetStreamSetup(bus, `consumer ${durable}`, async () => {
    const jsm = await bus.jetstreamManager();
    try {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: options.deliverPolicy === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
        ...changeable,
      });
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === CONSUMER_EXISTS)) throw error;
      // The client's update reads the stored settings and sends them with these changed.
      await jsm.consumers.update(stream, durable, changeable);
    }
    return connectionOf(bus).js.consumers.get(stream, durable);
  });
}
