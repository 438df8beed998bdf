import { createInbox, NoRespondersError, TimeoutError, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { BatchedPublisher } from './batched-publish.js';
import { inboxPrefixOfConnection, outgoingHeaders } from './wire.js';

/**
 * Request/reply whose requests leave through a `batchedPublisher`: the requests a process makes
 * in one turn of its event loop share a socket write (nats.js's own `request` writes once per
 * request when each comes from its own I/O callback, as HTTP requests do). Answers come to one
 * wildcard inbox per process. Fails with the client's own errors: `NoRespondersError` when the
 * server says nobody listens, `TimeoutError` at the deadline.
 */
export function batchedRequester(nc: NatsConnection, publisher: BatchedPublisher) {
  const prefix = createInbox(inboxPrefixOfConnection(nc));
  const pending = new Map<string, { resolve(msg: Msg): void; reject(error: unknown): void; timer: NodeJS.Timeout }>();
  nc.subscribe(`${prefix}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const call = pending.get(msg.subject);
      if (!call) return;
      pending.delete(msg.subject);
      clearTimeout(call.timer);
      if (msg.data.length === 0 && msg.headers?.code === 503) call.reject(new NoRespondersError(msg.subject));
      else call.resolve(msg);
    },
  });
  let sequence = 0;
  return (subject: string, data: Uint8Array, timeoutMs: number): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const inbox = `${prefix}.${(sequence++).toString(36)}`;
      const timer = setTimeout(() => {
        pending.delete(inbox);
        reject(new TimeoutError());
      }, timeoutMs);
      pending.set(inbox, { resolve, reject, timer });
      publisher.publish(subject, data, { reply: inbox, headers: outgoingHeaders() }, (error) => {
        pending.delete(inbox);
        clearTimeout(timer);
        reject(error);
      });
    });
}
