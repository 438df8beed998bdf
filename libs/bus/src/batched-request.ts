import { createInbox, headers as natsHeaders, NoRespondersError, TimeoutError, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import type { BatchedPublisher } from './batched-publish.js';
import { inboxPrefixOfConnection, outgoingHeaders } from './wire.js';

/**
 * A request's header asking its server to say, every this many milliseconds, that it is still
 * at work on it. A server that does not know it (an older replica) says nothing, and the request
 * ends at its timeout as it always did.
 */
export const KEEPALIVE_HEADER = 'latchkey-keepalive';
/** The header of a server's "still at work" message: it has no body. */
const WORKING_HEADER = 'latchkey-working';
/** How often a server may be asked to say so, at most: a requester cannot make it a flood. */
export const MIN_KEEPALIVE_MS = 100;

/** The interval a request asks its server to keep it alive at, or undefined when it asks none. */
export function keepaliveInterval(headers: MsgHdrs | undefined): number | undefined {
  const asked = headers?.get(KEEPALIVE_HEADER);
  if (!asked) return undefined;
  const every = Number(asked);
  return Number.isFinite(every) ? Math.max(MIN_KEEPALIVE_MS, every) : undefined;
}

/** The message a server sends to a request's inbox while its handler still runs. */
export function workingMessageHeaders(): MsgHdrs {
  const headers = natsHeaders();
  headers.set(WORKING_HEADER, '1');
  return headers;
}

interface Pending {
  resolve(msg: Msg): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout;
  /** How long the request waits past its server's last sign of life. */
  timeoutMs: number;
  /** When it stops waiting, however often its server says it is at work. */
  deadline: number;
}

/**
 * Request/reply whose requests leave through a `batchedPublisher`: the requests a process makes
 * in one turn of its event loop share a socket write (nats.js's own `request` writes once per
 * request when each comes from its own I/O callback, as HTTP requests do). Answers come to one
 * wildcard inbox per process. Fails with the client's own errors: `NoRespondersError` when the
 * server says nobody listens, `TimeoutError` at the deadline.
 *
 * With `upToMs` above `timeoutMs`, the request asks its server to say it is still at work every
 * third of `timeoutMs`; each time it does, the request waits `timeoutMs` more, up to `upToMs`
 * in all (below it, `upToMs` is the request's deadline). A server that died, or never took the request, says nothing: the request ends at
 * `timeoutMs`, as one to a slow but living server no longer does.
 */
export function batchedRequester(nc: NatsConnection, publisher: BatchedPublisher) {
  const prefix = createInbox(inboxPrefixOfConnection(nc));
  const pending = new Map<string, Pending>();
  const expire = (inbox: string) => {
    const call = pending.get(inbox);
    if (!call) return;
    pending.delete(inbox);
    call.reject(new TimeoutError());
  };
  nc.subscribe(`${prefix}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const call = pending.get(msg.subject);
      if (!call) return;
      // An answer is never empty (it is JSON): an empty message is NATS's "no responders" or a
      // server's sign that it is still at work.
      if (msg.data.length === 0 && msg.headers?.has(WORKING_HEADER)) {
        const left = call.deadline - Date.now();
        if (left <= 0) return;
        clearTimeout(call.timer);
        call.timer = setTimeout(expire, Math.min(call.timeoutMs, left), msg.subject);
        return;
      }
      pending.delete(msg.subject);
      clearTimeout(call.timer);
      if (msg.data.length === 0 && msg.headers?.code === 503) call.reject(new NoRespondersError(msg.subject));
      else call.resolve(msg);
    },
  });
  let sequence = 0;
  return (subject: string, data: Uint8Array, timeoutMs: number, upToMs = timeoutMs): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const inbox = `${prefix}.${(sequence++).toString(36)}`;
      const timer = setTimeout(expire, Math.min(timeoutMs, upToMs), inbox);
      pending.set(inbox, { resolve, reject, timer, timeoutMs, deadline: Date.now() + upToMs });
      const headers = outgoingHeaders();
      if (upToMs > timeoutMs) headers.set(KEEPALIVE_HEADER, String(Math.max(MIN_KEEPALIVE_MS, Math.floor(timeoutMs / 3))));
      publisher.publish(subject, data, { reply: inbox, headers }, (error) => {
        const call = pending.get(inbox);
        if (!call) return;
        pending.delete(inbox);
        clearTimeout(call.timer);
        reject(error);
      });
    });
}
