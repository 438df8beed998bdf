import { createInbox, type NatsConnection } from 'nats';
import {
  PROXY_KEEPALIVE_MS,
  PROXY_SUBJECT,
  proxyReplyMeta,
  proxyRequestMeta,
  type ProxyReplyMeta,
  type ProxyRequestMeta,
} from '@latchkey/contracts';
import { AppError, toErrorItems } from '@latchkey/errors';
import { inboxPrefixOfConnection } from './wire.js';
import { currentRequestId, requestIdFrom, runWithContext } from '@latchkey/logger';
import { unavailable } from './create-bus.js';

/*
 * The `proxy.request` wire. Under load a gateway has many calls to hand over in one turn of its
 * event loop, and a replica many answers; each NATS message costs a wake-up of the server and of
 * the receiver, and nats.js work on both sides, whatever its size. So one message carries every
 * call (or answer) of a turn, as frames:
 *
 *   call:   u32 call id | u32 meta length | meta (JSON) | u32 body length | body
 *   answer: u32 call id | u8 kind         | u32 meta length | meta (JSON) | u32 body length | body
 *
 * A call message's reply subject is the caller's inbox; answers and keepalives (kind 1, empty)
 * come back there, grouped per turn too. The request id of each call travels in its meta (the
 * NATS headers would be shared by every call of the message).
 */

const ANSWER = 0;
const KEEPALIVE = 1;
/**
 * At most this many frames to a message: a burst from one caller still spreads over the queue
 * group's replicas (each message goes to one), while most of the saving is kept.
 */
const FRAMES_PER_MESSAGE = 8;
/** Room left in a message for the protocol line. */
const ENVELOPE_HEADROOM = 4096;
/** A caller that hears nothing of a call for this long gives it up: the replica is gone. */
const SILENCE_MS = PROXY_KEEPALIVE_MS * 3;

export interface ProxyAnswer {
  meta: ProxyReplyMeta;
  body: Uint8Array;
}

interface Frame {
  head: Buffer;
  body: Uint8Array;
}

function callFrame(id: number, meta: string, body: Uint8Array): Frame {
  const metaLength = Buffer.byteLength(meta);
  const head = Buffer.allocUnsafe(12 + metaLength);
  head.writeUInt32BE(id, 0);
  head.writeUInt32BE(metaLength, 4);
  head.write(meta, 8);
  head.writeUInt32BE(body.length, 8 + metaLength);
  return { head, body };
}

function answerFrame(id: number, kind: number, meta: string, body: Uint8Array): Frame {
  const metaLength = Buffer.byteLength(meta);
  const head = Buffer.allocUnsafe(13 + metaLength);
  head.writeUInt32BE(id, 0);
  head.writeUInt8(kind, 4);
  head.writeUInt32BE(metaLength, 5);
  head.write(meta, 9);
  head.writeUInt32BE(body.length, 9 + metaLength);
  return { head, body };
}

/** Reads frames until the data ends; a frame that overruns it ends the reading. */
function* readFrames(data: Uint8Array, withKind: boolean): Generator<{ id: number; kind: number; meta: string; body: Uint8Array }> {
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  const fixed = withKind ? 13 : 12;
  while (at + fixed <= view.length) {
    const id = view.readUInt32BE(at);
    const kind = withKind ? view.readUInt8(at + 4) : ANSWER;
    const metaAt = at + (withKind ? 9 : 8);
    const metaEnd = metaAt + view.readUInt32BE(metaAt - 4);
    if (metaEnd + 4 > view.length) return;
    const bodyEnd = metaEnd + 4 + view.readUInt32BE(metaEnd);
    if (bodyEnd > view.length) return;
    yield { id, kind, meta: view.toString('utf8', metaAt, metaEnd), body: data.subarray(metaEnd + 4, bodyEnd) };
    at = bodyEnd;
  }
}

/**
 * Frames queued during one turn, sent at its end in as few messages as the payload limit and
 * `FRAMES_PER_MESSAGE` allow; `onError` hears of the frames of a message that could not be sent.
 */
function frameBatcher(nc: NatsConnection, onError: (frames: Frame[], subject: string, error: unknown) => void) {
  const limit = (nc.info?.max_payload ?? 1024 * 1024) - ENVELOPE_HEADROOM;
  let queued = new Map<string, { reply: string | undefined; frames: Frame[] }>();
  const send = (subject: string, reply: string | undefined, frames: Frame[]) => {
    let size = 0;
    for (const frame of frames) size += frame.head.length + frame.body.length;
    const data = Buffer.allocUnsafe(size);
    let at = 0;
    for (const frame of frames) {
      at += frame.head.copy(data, at);
      data.set(frame.body, at);
      at += frame.body.length;
    }
    try {
      nc.publish(subject, data, reply === undefined ? undefined : { reply });
    } catch (error) {
      onError(frames, subject, error);
    }
  };
  const flush = () => {
    const batches = queued;
    queued = new Map();
    for (const [subject, { reply, frames }] of batches) {
      let start = 0;
      let size = 0;
      frames.forEach((frame, index) => {
        const frameSize = frame.head.length + frame.body.length;
        if (index > start && (size + frameSize > limit || index - start === FRAMES_PER_MESSAGE)) {
          send(subject, reply, frames.slice(start, index));
          start = index;
          size = 0;
        }
        size += frameSize;
      });
      send(subject, reply, start === 0 ? frames : frames.slice(start));
    }
  };
  return {
    queue(subject: string, reply: string | undefined, frame: Frame): void {
      if (queued.size === 0) setImmediate(flush);
      const batch = queued.get(subject);
      if (batch) batch.frames.push(frame);
      else queued.set(subject, { reply, frames: [frame] });
    },
    flush,
  };
}

interface PendingCall {
  resolve(answer: ProxyAnswer): void;
  reject(error: AppError): void;
  heardAt: number;
  deadlineAt: number;
}

/**
 * The caller's side: answers come to one inbox per process, and one sweep a few times a second
 * gives up calls whose replica went silent (it died, or none runs) or whose deadline passed, so
 * the caller gets a 503 within seconds rather than at its deadline.
 */
function createProxyCaller(nc: NatsConnection) {
  const inbox = createInbox(inboxPrefixOfConnection(nc));
  const pending = new Map<number, PendingCall>();
  const settle = (id: number): PendingCall | undefined => {
    const call = pending.get(id);
    pending.delete(id);
    return call;
  };
  const outgoing = frameBatcher(nc, (frames, subject, error) => {
    for (const frame of frames) settle(frame.head.readUInt32BE(0))?.reject(unavailable(subject, error));
  });
  nc.subscribe(inbox, {
    callback: (error, msg) => {
      if (error) return;
      const now = Date.now();
      for (const frame of readFrames(msg.data, true)) {
        if (frame.kind === KEEPALIVE) {
          const call = pending.get(frame.id);
          if (call) call.heardAt = now;
          continue;
        }
        const call = settle(frame.id);
        if (!call) continue;
        try {
          call.resolve({ meta: proxyReplyMeta.parse(JSON.parse(frame.meta)), body: frame.body });
        } catch (cause) {
          call.reject(new AppError('internal_error', 'A proxy replica answered with an unreadable reply', { cause }));
        }
      }
    },
  });
  setInterval(() => {
    const now = Date.now();
    for (const [id, call] of pending) {
      if (now - call.heardAt > SILENCE_MS || now > call.deadlineAt) {
        settle(id)?.reject(new AppError('service_unavailable', 'No proxy replica answered, or the one handling the call stopped'));
      }
    }
  }, PROXY_KEEPALIVE_MS / 4).unref();

  let sequence = 0;
  return (meta: ProxyRequestMeta, body: Uint8Array, deadlineMs: number): Promise<ProxyAnswer> =>
    new Promise((resolve, reject) => {
      const id = sequence;
      sequence = (sequence + 1) >>> 0;
      const now = Date.now();
      pending.set(id, { resolve, reject, heardAt: now, deadlineAt: now + deadlineMs });
      const withRequestId = meta.request_id === undefined ? { ...meta, request_id: currentRequestId() } : meta;
      outgoing.queue(PROXY_SUBJECT, inbox, callFrame(id, JSON.stringify(withRequestId), body));
    });
}

const callers = new WeakMap<NatsConnection, ReturnType<typeof createProxyCaller>>();

/**
 * Sends one call to the proxy replicas (queue group `proxy`) and resolves with the replica's
 * answer: its metadata, and the body when it rode inline. The current request id goes along.
 */
export function proxyExchange(nc: NatsConnection, meta: ProxyRequestMeta, body: Uint8Array, deadlineMs: number): Promise<ProxyAnswer> {
  let call = callers.get(nc);
  if (!call) callers.set(nc, (call = createProxyCaller(nc)));
  return call(meta, body, deadlineMs);
}

/** One call as a replica gets it; `respond` may be called once, and ends its keepalives. */
export interface IncomingProxyCall {
  meta: ProxyRequestMeta;
  body: Uint8Array;
  respond(meta: ProxyReplyMeta, body: Uint8Array): void;
}

export interface ProxyCallServer {
  /** Stops taking calls, waits for the ones taken, and sends their answers. */
  drain(): Promise<void>;
}

/**
 * The replica's side: takes calls in queue group `proxy`, hands each to `handle`, and sends
 * answers, and every `PROXY_KEEPALIVE_MS` a keepalive for each call not yet answered, grouped
 * per caller and per turn. A call whose meta does not parse is answered `invalid_body` here.
 * Each call is handled in the async context of its caller's request id, as `bus.serve` does.
 */
export function serveProxyCalls(nc: NatsConnection, handle: (call: IncomingProxyCall) => Promise<void>): ProxyCallServer {
  // An answer that cannot be sent (the connection is gone) leaves its caller to the silence
  // limit: a 503 within seconds, as when a replica dies.
  const outgoing = frameBatcher(nc, () => undefined);
  const unanswered = new Map<number, { reply: string; id: number }>();
  const inFlight = new Set<Promise<void>>();
  let next = 0;
  const answer = (reply: string, id: number, meta: ProxyReplyMeta, body: Uint8Array) =>
    outgoing.queue(reply, undefined, answerFrame(id, ANSWER, JSON.stringify(meta), body));

  const subscription = nc.subscribe(PROXY_SUBJECT, {
    queue: 'proxy',
    callback: (error, msg) => {
      const reply = msg.reply;
      if (error || !reply) return;
      for (const frame of readFrames(msg.data, false)) {
        const parsed = safeMeta(frame.meta);
        if (!parsed.ok) {
          answer(reply, frame.id, { ok: false, error: parsed.error.toBody() }, new Uint8Array(0));
          continue;
        }
        const key = next++;
        unanswered.set(key, { reply, id: frame.id });
        const call: IncomingProxyCall = {
          meta: parsed.meta,
          body: frame.body,
          respond: (meta, body) => {
            if (!unanswered.delete(key)) return;
            answer(reply, frame.id, meta, body);
          },
        };
        const task = runWithContext({ requestId: requestIdFrom(parsed.meta.request_id) }, () => handle(call)).finally(() => inFlight.delete(task));
        inFlight.add(task);
      }
    },
  });
  setInterval(() => {
    for (const { reply, id } of unanswered.values()) outgoing.queue(reply, undefined, answerFrame(id, KEEPALIVE, '', new Uint8Array(0)));
  }, PROXY_KEEPALIVE_MS).unref();

  return {
    drain: async () => {
      await subscription.drain();
      await Promise.allSettled([...inFlight]);
      outgoing.flush();
    },
  };
}

function safeMeta(text: string): { ok: true; meta: ProxyRequestMeta } | { ok: false; error: AppError } {
  try {
    const result = proxyRequestMeta.safeParse(JSON.parse(text));
    if (result.success) return { ok: true, meta: result.data };
    return { ok: false, error: new AppError('invalid_body', 'The proxy call is invalid', { errors: toErrorItems(result.error.issues) }) };
  } catch {
    return { ok: false, error: new AppError('invalid_body', 'The proxy call is not JSON') };
  }
}
