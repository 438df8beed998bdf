import type { JsMsg } from '@nats-io/jetstream';
import type { EventContract, JobContract, PayloadOf } from '@latchkey/contracts';
import { runWithContext, newRequestId } from '@latchkey/logger';
import { DEFAULT_ACK_WAIT_MS, durableConsumer, settlerFor, type ConsumeOptions, type RunningConsumer } from './consume.js';
import { connectionOf } from './bus-connection.js';
import { secondsSince } from './observer.js';
import { decodeJson } from './wire.js';

/** What became of one message of a batch: done (acked), or the error that decides nak or term. */
export type BatchOutcome = { ok: true } | { ok: false; error: unknown };

export interface ConsumeBatchesOptions<C extends EventContract | JobContract>
  extends Omit<ConsumeOptions<C>, 'handler' | 'concurrency' | 'heartbeatMs'> {
  /** The most messages handed to one call of the handler. */
  batchSize: number;
  /** Batches one replica handles at a time. */
  concurrency: number;
  /**
   * How often JetStream is told that the messages this replica holds (its running batches and
   * those waiting their turn) are still being worked on; default a third of the ack wait.
   */
  heartbeatMs?: number;
  /**
   * Handles the messages that arrived together; answers one outcome per item, in order (a throw
   * fails the whole batch). Must be idempotent: JetStream delivers at least once.
   */
  handler: (items: Array<{ payload: PayloadOf<C>; msg: JsMsg }>) => Promise<BatchOutcome[]>;
}

/**
 * A durable pull consumer whose handler takes messages in batches: whatever arrived while the
 * previous batch was being handled, up to `batchSize`. Work that costs a round trip per call
 * (a query, a request, an insert) is then paid once per batch, not once per message, and the
 * batches grow by themselves when messages arrive faster than they are handled. Each message is
 * acked on its own outcome only after the handler has finished with it, as with `consume`.
 *
 * Every message this replica holds, running or waiting for a batch slot, is kept alive by a
 * heartbeat: a batch slower than the ack wait, or one waiting behind it, must not be handed
 * over again while this replica still means to run it (its second copy would meet the first's
 * writes and be slower still: a spiral). Only a replica that dies lets its messages go.
 */
export async function consumeBatches<C extends EventContract | JobContract>(options: ConsumeBatchesOptions<C>): Promise<RunningConsumer> {
  const { logger, contract, batchSize, concurrency, handler } = options;
  const consumer = await durableConsumer(options, options.maxAckPending ?? batchSize * concurrency * 2);
  const waiting: JsMsg[] = [];
  const inFlight = new Set<Promise<void>>();
  /** The messages of the batches running. */
  const running = new Set<JsMsg[]>();
  const heartbeat = setInterval(
    () => {
      for (const msg of waiting) msg.working();
      for (const batch of running) for (const msg of batch) msg.working();
    },
    options.heartbeatMs ?? Math.max(100, Math.floor((options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS) / 3)),
  );
  heartbeat.unref();
  const settle = settlerFor(options);
  const { observer } = connectionOf(options.bus);
  let scheduled = false;

  async function handle(batch: JsMsg[]): Promise<void> {
    const items: Array<{ payload: PayloadOf<C>; msg: JsMsg }> = [];
    for (const msg of batch) {
      const parsed = contract.payload.safeParse(decodeJson(msg.data));
      if (parsed.success) items.push({ payload: parsed.data as PayloadOf<C>, msg });
      else settle.malformed(msg);
    }
    if (items.length === 0) return;
    let outcomes: BatchOutcome[];
    const start = performance.now();
    try {
      outcomes = await handler(items);
    } catch (error) {
      outcomes = items.map(() => ({ ok: false, error }));
    }
    const seconds = secondsSince(start);
    items.forEach(({ msg }, index) => {
      const outcome = outcomes[index] ?? { ok: false, error: new Error('the batch handler gave no outcome for this message') };
      // Each message of a batch took as long as its batch.
      observer.consumed(contract.subject, seconds, outcome.ok ? undefined : options.bus.toAppError(outcome.error).code);
      try {
        if (outcome.ok) msg.ack();
        else settle.failed(msg, outcome.error);
      } catch (error) {
        // The connection is gone: JetStream hands the message over again after its ack wait.
        logger.warn('could not settle a message', { subject: msg.subject, seq: msg.seq, error });
      }
    });
  }

  /** Starts batches while there is room; a batch takes what waited, up to `batchSize`. */
  function dispatch(): void {
    scheduled = false;
    while (waiting.length > 0 && inFlight.size < concurrency) {
      const batch = waiting.splice(0, batchSize);
      running.add(batch);
      // A batch has many origins; its own request id ties its log lines and hops together.
      const task = runWithContext({ requestId: newRequestId() }, () => handle(batch)).finally(() => {
        running.delete(batch);
        inFlight.delete(task);
        dispatch();
      });
      inFlight.add(task);
    }
  }

  let stopping = false;
  let messages: Awaited<ReturnType<typeof consumer.consume>> | undefined;
  const loop = (async () => {
    let failures = 0;
    while (!stopping) {
      try {
        messages = await consumer.consume({ max_messages: batchSize * concurrency });
        for await (const msg of messages) {
          failures = 0;
          waiting.push(msg);
          // Gather what arrives in this turn of the event loop before starting a batch.
          if (!scheduled) {
            scheduled = true;
            setImmediate(dispatch);
          }
          // No wait here for a slot: a message left in the client's buffer has no heartbeat and
          // would be handed over again. The consumer's max_ack_pending bounds what waits.
          if (waiting.length >= batchSize) dispatch();
        }
        if (stopping) break;
        throw new Error('the consumer stopped delivering');
      } catch (error) {
        if (stopping) break;
        // The client gave up on this pull (the consumer moved or vanished while NATS changed
        // nodes): consume again, with back-off, rather than fall silent for good.
        failures += 1;
        if (failures === 1 || failures % 10 === 0) logger.warn('a batch consumer stopped; consuming again', { durable: options.durable, failures, error });
        await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** Math.min(failures, 6))));
      }
    }
  })();

  return {
    stop: async () => {
      stopping = true;
      await messages?.close();
      await loop.catch(() => undefined);
      // Messages taken but not started go back at once rather than after their ack wait.
      for (const msg of waiting.splice(0)) msg.nak();
      await Promise.allSettled(inFlight);
      clearInterval(heartbeat);
    },
  };
}
