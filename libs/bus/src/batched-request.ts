import { AsyncLocalStorage } from 'node:async_hooks';
import { createInbox, headers as natsHeaders, NoRespondersError, TimeoutError, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import type { BatchedPublisher } from './batched-publish.js';
import { inboxPrefixOfConnection, outgoingHeaders } from './wire.js';

/**
 * A request's header, `<timeout>/<bound>` in milliseconds: how long its requester waits for an
 * answer or the server's next sign of life, and how long in all. While the bound is the longer,
 * the server says it is still at work every third of the timeout, until the bound; and the
 * requests its handler makes wait on, past their own timeout, no further than the bound. A
 * server of an older version ignores it: it says nothing, and the request ends at its timeout
 * as it always did.
 */
export const WAIT_HEADER = 'latchkey-wait';
/** The header of a server's "still at work" message, which has no body. */
const WORKING_HEADER = 'latchkey-working';
const WORKING = (() => {
  const headers = natsHeaders();
  headers.set(WORKING_HEADER, '1');
  return headers;
})();
/** How often a server may be asked to say it is at work: no flood, and no interval Node cannot keep. */
const KEEPALIVE_MS = { least: 100, most: 60_000 };
/** The longest bound a server keeps a request alive for, whatever it asks. */
const LONGEST_BOUND_MS = 3_600_000;

/** What a server reads of its caller's wait: when to say it is at work, and until when (`performance.now()` time). */
export interface CallerWait {
  /** Undefined when the caller waits no longer than its timeout: nothing to say. */
  keepaliveEveryMs: number | undefined;
  untilAt: number;
}

/** The wait a request's caller asked for (`WAIT_HEADER`), from when it was received; undefined for none. */
export function callerWait(headers: MsgHdrs | undefined, receivedAt: number): CallerWait | undefined {
  const asked = headers?.get(WAIT_HEADER);
  if (!asked) return undefined;
  const [timeoutMs, boundMs] = asked.split('/', 2).map(Number);
  if (!(timeoutMs! > 0) || !(boundMs! > 0)) return undefined;
  const bound = Math.min(boundMs!, LONGEST_BOUND_MS);
  const every = Math.min(KEEPALIVE_MS.most, Math.max(KEEPALIVE_MS.least, Math.floor(timeoutMs! / 3)));
  return { keepaliveEveryMs: bound > timeoutMs! ? every : undefined, untilAt: receivedAt + bound };
}

/** A "still at work" message has no body, only its header. */
const EMPTY = new Uint8Array(0);
/** One that cannot leave (the connection is going): the caller's timeout says the rest. */
const ignoreUnsent = () => undefined;

/**
 * Tells `inbox` every `wait.keepaliveEveryMs`, until the caller's bound, that its request is still
 * being worked on: the server's side of a request kept alive, through the publisher its reply
 * takes, so the reply comes after them. The caller stops the timer when its handler ends.
 */
export function keepAlive(wait: CallerWait, inbox: string, publisher: BatchedPublisher): NodeJS.Timeout | undefined {
  if (wait.keepaliveEveryMs === undefined) return undefined;
  const timer = setInterval(() => {
    if (performance.now() >= wait.untilAt) clearInterval(timer);
    else publisher.publish(inbox, EMPTY, { headers: WORKING }, ignoreUnsent);
  }, wait.keepaliveEveryMs);
  timer.unref();
  return timer;
}

/** The bound of the request a handler is answering (`performance.now()` time), for the requests it makes. */
const handlerBound = new AsyncLocalStorage<number>();

/** Runs `work` as a handler of a request whose caller waits until `untilAt`. */
export function withinCallerBound<T>(untilAt: number, work: () => T): T {
  return handlerBound.run(untilAt, work);
}

interface Pending {
  resolve(msg: Msg): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout;
  /** How long the request waits past its server's last sign of life. */
  timeoutMs: number;
  /** When it stops waiting, however often its server says it is at work (`performance.now()` time). */
  deadline: number;
}

/**
 * Request/reply whose requests leave through a `batchedPublisher`: the requests a process makes
 * in one turn of its event loop share a socket write (nats.js's own `request` writes once per
 * request when each comes from its own I/O callback, as HTTP requests do). Answers come to one
 * wildcard inbox per process. Fails with the client's own errors: `NoRespondersError` when the
 * server says nobody listens, `TimeoutError` at the deadline.
 *
 * With `upToMs` above `timeoutMs`, the server says it is still at work every third of
 * `timeoutMs`; each time it does, the request waits `timeoutMs` more, up to `upToMs` in all
 * (below `timeoutMs`, `upToMs` is the request's deadline). A server that died, or never took the
 * request, says nothing: the request ends one `timeoutMs` after the last sign, as one to a slow
 * but living server no longer does. Made by a handler, a request waits on no further than its
 * own caller does (never less than `timeoutMs`).
 */
export function batchedRequester(nc: NatsConnection, publisher: BatchedPublisher) {
  const prefix = createInbox(inboxPrefixOfConnection(nc));
  const pending = new Map<string, Pending>();
  /** Past this (`performance.now()` time), no request waits on for a server at work (`hurry`). */
  let hurriedAt = Infinity;
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
        const left = call.deadline - performance.now();
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
  const send = (subject: string, data: Uint8Array, timeoutMs: number, asked = timeoutMs): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const inbox = `${prefix}.${(sequence++).toString(36)}`;
      const outer = handlerBound.getStore();
      const bound = Math.min(outer ?? Infinity, hurriedAt);
      const upToMs = bound === Infinity ? asked : Math.min(asked, Math.max(timeoutMs, Math.floor(bound - performance.now())));
      const timer = setTimeout(expire, Math.min(timeoutMs, upToMs), inbox);
      pending.set(inbox, { resolve, reject, timer, timeoutMs, deadline: performance.now() + upToMs });
      const headers = outgoingHeaders();
      headers.set(WAIT_HEADER, `${timeoutMs}/${upToMs}`);
      publisher.publish(subject, data, { reply: inbox, headers }, (error) => {
        const call = pending.get(inbox);
        if (!call) return;
        pending.delete(inbox);
        clearTimeout(call.timer);
        reject(error);
      });
    });
  return {
    send,
    /**
     * No request waits on for a server at work past `withinMs` from now, those in flight
     * included (a request still ends no sooner than its timeout): a stopping service answers
     * what it holds within its shutdown time.
     */
    hurry: (withinMs: number) => {
      hurriedAt = Math.min(hurriedAt, performance.now() + withinMs);
      for (const call of pending.values()) call.deadline = Math.min(call.deadline, hurriedAt);
    },
  };
}
