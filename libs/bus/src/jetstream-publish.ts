import { createInbox, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { inboxPrefixOfConnection } from './wire.js';
import { batchedPublisher } from './batched-publish.js';

export interface JetStreamPublisher {
  /** Stores `data` on the stream that takes `subject`; resolves once JetStream acknowledged it. */
  publish(subject: string, data: Uint8Array, headers: MsgHdrs, msgId?: string): Promise<void>;
  /** Sends what is queued now (before a drain). */
  flush(): void;
}

/** Why JetStream did not store a message: the caller maps it to `service_unavailable`. */
export class PublishNotAcknowledged extends Error {
  override readonly name: string = 'PublishNotAcknowledged';
}

/**
 * The stream that takes the subject holds its bound of bytes and refuses new messages (discard
 * `new`, as JOBS does) until old ones age out: said apart, so the caller's 503 names it.
 */
export class StreamFull extends PublishNotAcknowledged {
  override readonly name = 'StreamFull';
  constructor(readonly stream: string) {
    super(`the ${stream} stream is full`);
  }
}

/** JetStream's answer to a message past a stream's `max_bytes` with discard `new` ("maximum bytes exceeded"). */
const STREAM_STORE_FAILED = 10077;

const decoder = new TextDecoder();

/**
 * JetStream publishes at the cost of a core publish: every publish of one event-loop turn leaves
 * in one socket write (`batchedPublisher`), and the acknowledgements come back on one wildcard
 * inbox subscription, matched by token. nats.js's `js.publish` pays per message for a request
 * object, its own timer, an error captured for async stack traces and a socket write, which on
 * the webhook ingest path cost more than the HTTP request itself. Deadlines are checked by one
 * sweep, so a publish fails between `timeoutMs` and twice that after it was queued.
 */
export function jetStreamPublisher(nc: NatsConnection, timeoutMs: number): JetStreamPublisher {
  const sender = batchedPublisher(nc);
  const inbox = createInbox(inboxPrefixOfConnection(nc));
  const pending = new Map<string, { resolve: () => void; reject: (error: Error) => void; deadline: number }>();
  let next = 0;
  let sweep: NodeJS.Timeout | undefined;

  const settle = (token: string, error?: Error) => {
    const waiter = pending.get(token);
    if (!waiter) return;
    pending.delete(token);
    if (error) waiter.reject(error);
    else waiter.resolve();
    if (pending.size === 0) {
      clearInterval(sweep);
      sweep = undefined;
    }
  };

  nc.subscribe(`${inbox}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const token = msg.subject.slice(inbox.length + 1);
      // A status message (503: no stream takes the subject) carries no acknowledgement.
      if (msg.headers?.hasError) return settle(token, new PublishNotAcknowledged(`JetStream answered ${msg.headers.code} ${msg.headers.description}`));
      let ack: { stream?: unknown; error?: { err_code?: unknown; description?: unknown } };
      try {
        ack = JSON.parse(decoder.decode(msg.data)) as typeof ack;
      } catch {
        return settle(token, new PublishNotAcknowledged('JetStream answered something other than an acknowledgement'));
      }
      if (ack.error?.err_code === STREAM_STORE_FAILED && /maximum bytes/i.test(String(ack.error.description)) && typeof ack.stream === 'string') {
        return settle(token, new StreamFull(ack.stream));
      }
      if (ack.error) return settle(token, new PublishNotAcknowledged(`JetStream refused the message: ${String(ack.error.description)}`));
      if (typeof ack.stream !== 'string' || ack.stream === '') return settle(token, new PublishNotAcknowledged('JetStream answered an empty acknowledgement'));
      settle(token);
    },
  });

  const expire = () => {
    const now = Date.now();
    for (const [token, waiter] of pending) if (waiter.deadline <= now) settle(token, new PublishNotAcknowledged('no acknowledgement within the deadline'));
  };

  return {
    publish: (subject, data, headers, msgId) =>
      new Promise<void>((resolve, reject) => {
        const token = (next++).toString(36);
        if (msgId !== undefined) headers.set('Nats-Msg-Id', msgId);
        pending.set(token, { resolve, reject, deadline: Date.now() + timeoutMs });
        sweep ??= setInterval(expire, timeoutMs).unref();
        sender.publish(subject, data, { reply: `${inbox}.${token}`, headers }, (error) => settle(token, error instanceof Error ? error : new PublishNotAcknowledged(String(error))));
      }),
    flush: sender.flush,
  };
}
