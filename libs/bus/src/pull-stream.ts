import { createInbox, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { isPullStreamSubject, pullStreamPrefixOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { connectionOf } from './bus-connection.js';
import type { Bus } from './create-bus.js';
import { inboxPrefixOfConnection, isInboxSubject } from './wire.js';

/**
 * Bodies too large for one NATS message travel as a pull stream: the producer answers on an
 * inbox, one chunk per request, and the consumer asks for the next chunk only when it has
 * written the last one. Flow control is therefore the consumer's own pace, and each side holds
 * at most one chunk in memory.
 */
export const CHUNK_BYTES = 256 * 1024;
const EOF_HEADER = 'lk-eof';
const ERROR_HEADER = 'lk-error';
const CANCEL = new TextEncoder().encode('cancel');

export interface PullStreamOptions {
  /** Abandon the stream if the consumer does not ask for a chunk within this long. */
  idleTimeoutMs: number;
}

/** Serves `source` chunk by chunk on a fresh inbox; resolves when it ends or is abandoned. */
export function servePullStream(
  bus: Bus,
  source: AsyncIterable<Uint8Array>,
  options: PullStreamOptions & { onAbandon?: () => void },
): { inbox: string; done: Promise<void> } {
  return servePullStreamOn(connectionOf(bus).nc, source, options);
}

/** Reads a pull stream served on `inbox`, chunk by chunk, asking for each in turn. */
export function pullStream(bus: Bus, inbox: string, timeoutMs: number): AsyncGenerator<Uint8Array> {
  const { nc } = connectionOf(bus);
  const reading = pullStreamFrom(nc, inbox, timeoutMs);
  const [next, finish, fail] = [reading.next.bind(reading), reading.return.bind(reading), reading.throw.bind(reading)];
  let started = false;
  // A generator never started runs no `finally` when returned: the producer is told here.
  const cancelUnstarted = () => {
    if (!started && isPullStreamSubject(inbox)) nc.publish(inbox, CANCEL);
    started = true;
  };
  return Object.assign(reading, {
    next: (...args: [] | [unknown]) => {
      started = true;
      return next(...args);
    },
    return: (value?: unknown) => {
      cancelUnstarted();
      return finish(value);
    },
    throw: (error?: unknown) => {
      cancelUnstarted();
      return fail(error);
    },
  });
}

/** Serves one buffer as a pull stream (for payloads too large for a NATS message). */
export function serveBytes(bus: Bus, bytes: Uint8Array, options: PullStreamOptions): { inbox: string; done: Promise<void> } {
  return serveBytesOn(connectionOf(bus).nc, bytes, options);
}

/** Reads a whole pull stream into memory, refusing more than `maxBytes` (`payload_too_large`). */
export function pullAll(bus: Bus, inbox: string, timeoutMs: number, maxBytes: number): Promise<Buffer> {
  return pullAllFrom(connectionOf(bus).nc, inbox, timeoutMs, maxBytes);
}

const NOT_YET = Symbol('not yet');
/** Resolves once what is ready now has had its turn: a piece already buffered wins the race. */
const notYet = () => new Promise<typeof NOT_YET>((resolve) => setImmediate(() => resolve(NOT_YET)));

function servePullStreamOn(
  nc: NatsConnection,
  source: AsyncIterable<Uint8Array>,
  options: PullStreamOptions & { onAbandon?: () => void },
): { inbox: string; done: Promise<void> } {
  // Under the connection's own stream prefix: readers may publish there, not into its reply inboxes.
  const inbox = createInbox(pullStreamPrefixOf(inboxPrefixOfConnection(nc)));
  const subscription = nc.subscribe(inbox);
  const iterator = source[Symbol.asyncIterator]();
  let pending: Uint8Array = new Uint8Array(0);
  /** A piece asked for and not yet come when the last pull was answered: the next pull's first. */
  let asked: Promise<IteratorResult<Uint8Array>> | undefined;

  /**
   * A pull's answer: it waits for a first piece, then takes what is ready at once, up to
   * `CHUNK_BYTES`. A fast source fills whole chunks; a slow one (server-sent events, a model's
   * tokens) goes piece by piece as it comes, rather than waiting for a chunk's worth, past the
   * reader's timeout.
   */
  async function nextChunk(): Promise<{ chunk: Uint8Array; eof: boolean }> {
    while (pending.length < CHUNK_BYTES) {
      const next = asked ?? iterator.next();
      asked = undefined;
      const result = pending.length === 0 ? await next : await Promise.race([next, notYet()]);
      if (result === NOT_YET) {
        // Kept for the next pull, which meets its failure (the race has already handled it).
        asked = next;
        break;
      }
      if (result.done) return { chunk: take(pending.length), eof: true };
      pending = pending.length === 0 ? result.value : concat(pending, result.value);
    }
    return { chunk: take(Math.min(CHUNK_BYTES, pending.length)), eof: false };
  }

  function take(bytes: number): Uint8Array {
    const chunk = pending.subarray(0, bytes);
    pending = pending.subarray(bytes);
    return chunk;
  }

  const done = (async () => {
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => subscription.unsubscribe(), options.idleTimeoutMs);
    };
    armIdle();
    let finished = false;
    try {
      for await (const msg of subscription) {
        armIdle();
        if (msg.data.length > 0 && msg.string() === 'cancel') break;
        // Chunks go to a reader's inbox only (`isInboxSubject`).
        if (!isInboxSubject(msg.reply)) continue;
        const headers = natsHeaders();
        try {
          const { chunk, eof } = await nextChunk();
          if (eof) headers.set(EOF_HEADER, '1');
          msg.respond(chunk, { headers });
          if (eof) {
            finished = true;
            break;
          }
        } catch (error) {
          headers.set(ERROR_HEADER, error instanceof AppError ? error.code : 'upstream_unreachable');
          msg.respond(new Uint8Array(0), { headers });
          finished = true;
          break;
        }
      }
    } finally {
      clearTimeout(idle);
      subscription.unsubscribe();
      if (!finished) {
        options.onAbandon?.();
        await iterator.return?.();
      }
    }
  })();
  return { inbox, done };
}

async function* pullStreamFrom(nc: NatsConnection, inbox: string, timeoutMs: number): AsyncGenerator<Uint8Array> {
  if (!isPullStreamSubject(inbox)) throw new AppError('internal_error', 'A body stream was named by a subject that is not one');
  let finished = false;
  try {
    for (;;) {
      let reply;
      try {
        reply = await nc.request(inbox, new Uint8Array(0), { timeout: timeoutMs });
      } catch (error) {
        throw new AppError('service_unavailable', 'A body stream stopped answering', { cause: error });
      }
      const failed = reply.headers?.get(ERROR_HEADER);
      if (failed) throw new AppError('upstream_unreachable', `The body stream failed (${failed})`);
      if (reply.data.length > 0) yield reply.data;
      if (reply.headers?.get(EOF_HEADER) === '1') {
        finished = true;
        return;
      }
    }
  } finally {
    // The reader stopped early (client went away): tell the producer to let go.
    if (!finished) nc.publish(inbox, CANCEL);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

export function serveBytesOn(nc: NatsConnection, bytes: Uint8Array, options: PullStreamOptions): { inbox: string; done: Promise<void> } {
  return servePullStreamOn(
    nc,
    (async function* () {
      yield bytes;
    })(),
    options,
  );
}

export async function pullAllFrom(nc: NatsConnection, inbox: string, timeoutMs: number, maxBytes: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of pullStreamFrom(nc, inbox, timeoutMs)) {
    size += chunk.length;
    if (size > maxBytes) throw new AppError('payload_too_large', `The body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
