import { AckPolicy, DeliverPolicy, nanos, type JsMsg } from 'nats';
import type { EventContract, JobContract, PayloadOf } from '@latchkey/contracts';
import { toAppError } from '@latchkey/errors';
import { runWithContext, type Logger } from '@latchkey/logger';
import type { Bus } from './create-bus.js';
import { decodeJson, requestIdOf } from './wire.js';

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
   * the work takes. Pick it well under `ackWaitMs`.
   */
  heartbeatMs?: number;
  /** Delay before a retryable failure is delivered again. */
  retryDelayMs?: (deliveryCount: number) => number;
  /**
   * Must be idempotent: JetStream delivers at least once. Returning `{ retryInMs }` asks for the
   * message again after that delay (a retry the handler scheduled itself, e.g. from Retry-After).
   */
  handler: (payload: PayloadOf<C>, msg: JsMsg) => Promise<void | { retryInMs: number }>;
}

export interface RunningConsumer {
  /** Stops fetching and waits for the messages in hand. */
  stop(): Promise<void>;
}

const defaultDelay = (deliveryCount: number) => Math.min(60_000, 1000 * 2 ** Math.min(deliveryCount - 1, 6));

/**
 * Runs a durable pull consumer with explicit acks: success acks, a retryable AppError naks with
 * a delay, anything else (and a payload that fails its schema) is terminated and logged.
 */
export async function consume<C extends EventContract | JobContract>(options: ConsumeOptions<C>): Promise<RunningConsumer> {
  const { bus, logger, stream, durable, contract, concurrency, handler } = options;
  const consumer = await durableConsumer(options, options.maxAckPending ?? Math.max(concurrency * 4, 16));
  const messages = await consumer.consume({ max_messages: concurrency });
  const inFlight = new Set<Promise<void>>();
  const delayOf = options.retryDelayMs ?? defaultDelay;

  async function handle(msg: JsMsg): Promise<void> {
    const parsed = contract.payload.safeParse(decodeJson(msg.data));
    if (!parsed.success) {
      logger.error('terminated a malformed message', { subject: msg.subject, seq: msg.seq });
      msg.term();
      return;
    }
    const heartbeat = options.heartbeatMs === undefined ? undefined : setInterval(() => msg.working(), options.heartbeatMs);
    try {
      const outcome = await handler(parsed.data as PayloadOf<C>, msg);
      if (outcome) msg.nak(Math.max(0, Math.round(outcome.retryInMs)));
      else msg.ack();
    } catch (error) {
      settleFailed(logger, msg, error, delayOf);
    } finally {
      clearInterval(heartbeat);
    }
  }

  const loop = (async () => {
    for await (const msg of messages) {
      const task = runWithContext({ requestId: requestIdOf(msg.headers) }, () => handle(msg)).finally(() => inFlight.delete(task));
      inFlight.add(task);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
  })();

  return {
    stop: async () => {
      await messages.close();
      await loop.catch(() => undefined);
      await Promise.allSettled(inFlight);
    },
  };
}

/** Creates (or updates) the durable pull consumer of `options` and returns it. */
export async function durableConsumer(
  options: Pick<ConsumeOptions<EventContract | JobContract>, 'bus' | 'stream' | 'durable' | 'contract' | 'deliverPolicy' | 'ackWaitMs'>,
  maxAckPending: number,
) {
  const { bus, stream, durable, contract } = options;
  const jsm = await bus.jetstreamManager();
  await jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: options.deliverPolicy === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
    filter_subject: contract.subject,
    max_ack_pending: maxAckPending,
    ack_wait: nanos(options.ackWaitMs ?? 30_000),
  });
  return bus.js.consumers.get(stream, durable);
}

/** A failed message: a retryable AppError comes back after a delay; anything else is terminated and logged. */
export function settleFailed(logger: Logger, msg: JsMsg, error: unknown, delayOf: (deliveryCount: number) => number = defaultDelay): void {
  const appError = toAppError(error);
  if (appError.retryable) {
    msg.nak(delayOf(msg.info.redeliveryCount));
  } else {
    logger.error('terminated a message after a final error', { subject: msg.subject, code: appError.code, error: appError.cause ?? appError });
    msg.term();
  }
}
