import type { JsMsg } from '@nats-io/jetstream';
import type { EventContract, JobContract, PayloadOf } from '@latchkey/contracts';
import { runWithContext, newRequestId } from '@latchkey/logger';
import { DEFAULT_ACK_WAIT_MS, FETCH_EXPIRES_MS, FETCH_HEARTBEAT_MS, durableConsumer, settlerFor, type ConsumeOptions, type RunningConsumer } from './consume.js';
import { connectionOf } from './bus-connection.js';
import { secondsSince } from './observer.js';
import { safeParseJson } from './wire.js';

/** What became of one message of a batch: done (acked), or the error that decides nak or term. */
export type BatchOutcome = { ok: true } | { ok: false; error: unknown };

/**
 * A batch is never handed back as `consume` hands back a slow message (`handBackAfterMs`): its
 * items share one handler call, so `stop()` waits for the running batches to end.
 */
export interface ConsumeBatchesOptions<C extends EventContract | JobContract>
  extends Omit<ConsumeOptions<C>, 'handler' | 'concurrency' | 'heartbeatMs' | 'handBackAfterMs'> {
  /** The most messages handed to one call of the handler. */
  batchSize: number;
  /** Batches one replica handles at a time. */
  concurrency: number;
  /**
   * The most bytes of messages one replica holds, running or waiting for a batch slot: a backlog
   * of large messages (provider webhooks near their size limit) costs this much memory at most,
   * not `maxAckPending` times the largest message. Default `DEFAULT_MAX_HELD_BYTES`; raised to
   * the server's largest message when below it.
   */
  maxHeldBytes?: number;
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

/** What one replica's batch consumer holds at most, by default: 64 MiB. */
export const DEFAULT_MAX_HELD_BYTES = 64 * 1024 * 1024;

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
 *
 * So it pulls only what it has room for: each pull asks for as many messages as would fit under
 * `maxHeldBytes` were each the largest the server takes, and none goes out while not one would
 * fit. A backlog of small messages fills a pull; `maxAckPending` bounds their count server-side.
 */
export async function consumeBatches<C extends EventContract | JobContract>(options: ConsumeBatchesOptions<C>): Promise<RunningConsumer> {
  const { logger, contract, batchSize, concurrency, handler } = options;
  const maxAckPending = options.maxAckPending ?? batchSize * concurrency * 2;
  const consumer = await durableConsumer(options, maxAckPending);
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
  const maxHeldBytes = options.maxHeldBytes ?? DEFAULT_MAX_HELD_BYTES;
  /** The bytes of the messages held: waiting for a batch slot or in a running batch. */
  let heldBytes = 0;

  async function handle(batch: JsMsg[]): Promise<void> {
    const items: Array<{ payload: PayloadOf<C>; msg: JsMsg }> = [];
    for (const msg of batch) {
      // One malformed message (not even JSON) is given up alone; the rest of its batch runs.
      const parsed = safeParseJson(contract.payload, msg.data);
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
        for (const msg of batch) heldBytes -= msg.data.length;
        roomMade?.();
        roomMade = undefined;
        dispatch();
      });
      inFlight.add(task);
    }
  }

  let stopping = false;
  let pulling: Awaited<ReturnType<typeof consumer.fetch>> | undefined;
  /** Wakes the pull loop waiting for room, when a batch ends. */
  let roomMade: (() => void) | undefined;
  const loop = (async () => {
    let failures = 0;
    while (!stopping) {
      // As many as fit in the room left were each the largest message the server takes (read
      // at each pull: it can change with the connection).
      const largest = options.bus.maxPayload;
      const room = Math.floor((Math.max(maxHeldBytes, largest) - heldBytes) / largest);
      if (room < 1) {
        await new Promise<void>((resolve) => (roomMade = resolve));
        continue;
      }
      try {
        pulling = await consumer.fetch({ max_messages: Math.min(room, maxAckPending), expires: FETCH_EXPIRES_MS, idle_heartbeat: FETCH_HEARTBEAT_MS });
        // Stopped while the pull was being set up (right after start): stop() found none to end.
        if (stopping) pulling.stop();
        for await (const msg of pulling) {
          // Delivered as the consumer stops: back to JetStream at once, for another replica.
          if (stopping) {
            msg.nak();
            continue;
          }
          heldBytes += msg.data.length;
          waiting.push(msg);
          // Gather what arrives in this turn of the event loop before starting a batch.
          if (!scheduled) {
            scheduled = true;
            setImmediate(dispatch);
          }
          if (waiting.length >= batchSize) dispatch();
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
      roomMade?.();
      await loop.catch(() => undefined);
      // Messages taken but not started go back at once rather than after their ack wait.
      for (const msg of waiting.splice(0)) msg.nak();
      await Promise.allSettled(inFlight);
      clearInterval(heartbeat);
    },
  };
}
