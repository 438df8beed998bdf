import { inSendSpan, pullAll, pullStream, servePullStream, unavailable, type Bus } from '@latchkey/bus';
import {
  PROXY_KEEPALIVE_MS,
  PROXY_SUBJECT,
  PROXY_TRACESTATE_MAX,
  parseProxyReplyMeta,
  proxyDeadlineMs,
  type ProxyReplyMeta,
  type ProxyRequestMeta,
} from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { currentRequestId } from '@latchkey/logger';
import { traceHeaders, tracingEnabled } from '@latchkey/tracing';
import { callFrame, frameBatcher, frameId, KEEPALIVE, readFrames } from './frames.js';

/** A caller that hears nothing of a call for this long gives it up: the replica is gone. */
const SILENCE_MS = PROXY_KEEPALIVE_MS * 3;
/**
 * How long past its deadline a caller still waits for a replica it hears from: the replica ends
 * the call at the deadline itself (the call names it), and its answer, the provider's last one or
 * `upstream_timeout`, is worth more than a 503.
 */
const DEADLINE_GRACE_MS = PROXY_KEEPALIVE_MS * 2;

/** A replica's answer as it came: its metadata, and the body when it rode inline. */
export interface ProxyAnswer {
  meta: ProxyReplyMeta;
  body: Uint8Array;
}

interface PendingCall {
  resolve(answer: ProxyAnswer): void;
  reject(error: AppError): void;
  heardAt: number;
  deadlineAt: number;
}

type Exchange = (meta: ProxyRequestMeta, body: Uint8Array, deadlineMs: number) => Promise<ProxyAnswer>;

/**
 * The caller's side: answers come to one inbox per process, and one sweep a few times a second
 * gives up calls whose replica went silent (it died, or none runs) or whose deadline passed, so
 * the caller gets a 503 within seconds rather than at its deadline.
 */
function createExchange(bus: Bus): Exchange {
  const inbox = bus.newInbox();
  const pending = new Map<number, PendingCall>();
  const settle = (id: number): PendingCall | undefined => {
    const call = pending.get(id);
    pending.delete(id);
    return call;
  };
  const outgoing = frameBatcher(bus, (frames, subject, error) => {
    for (const frame of frames) settle(frameId(frame))?.reject(unavailable(subject, error));
  });
  bus.subscribeRaw(inbox, (message) => {
    const now = Date.now();
    for (const frame of readFrames(message.data, true)) {
      if (frame.kind === KEEPALIVE) {
        const call = pending.get(frame.id);
        if (call) call.heardAt = now;
        continue;
      }
      const call = settle(frame.id);
      if (!call) continue;
      try {
        call.resolve({ meta: parseProxyReplyMeta(JSON.parse(frame.meta)), body: frame.body });
      } catch (cause) {
        call.reject(new AppError('internal_error', 'A proxy replica answered with an unreadable reply', { cause }));
      }
    }
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
  return (meta, body, deadlineMs) =>
    new Promise((resolve, reject) => {
      const id = sequence;
      sequence = (sequence + 1) >>> 0;
      const now = Date.now();
      pending.set(id, { resolve, reject, heardAt: now, deadlineAt: now + deadlineMs + DEADLINE_GRACE_MS });
      const withRequestId = meta.request_id === undefined ? { ...meta, request_id: currentRequestId() } : meta;
      outgoing.queue(PROXY_SUBJECT, inbox, callFrame(id, JSON.stringify(withTraceContext(withRequestId)), body));
    });
}

/**
 * The call's meta with the active trace context, while tracing is on. A caller's `tracestate`
 * longer than the contract takes (W3C asks to pass on at least 512 characters) is left out
 * rather than failing the call.
 */
function withTraceContext(meta: ProxyRequestMeta): ProxyRequestMeta {
  const trace = traceHeaders();
  if (trace === undefined) return meta;
  const { traceparent, tracestate } = trace;
  return { ...meta, traceparent, ...(tracestate !== undefined && tracestate.length <= PROXY_TRACESTATE_MAX ? { tracestate } : {}) };
}

const exchanges = new WeakMap<Bus, Exchange>();

/**
 * Sends one call to the proxy replicas (queue group `proxy`) as it is, and resolves with the
 * replica's answer. The current request id goes along. The call is given up (503) when its
 * replica goes silent, or `DEADLINE_GRACE_MS` past `deadlineMs` (which the meta's `deadline_ms`
 * should name, so the replica stops there too). `callProxy` is what callers use; this is the wire
 * beneath it.
 */
export function proxyExchange(bus: Bus, meta: ProxyRequestMeta, body: Uint8Array, deadlineMs: number): Promise<ProxyAnswer> {
  let exchange = exchanges.get(bus);
  if (!exchange) exchanges.set(bus, (exchange = createExchange(bus)));
  const send = exchange;
  return tracingEnabled() ? inSendSpan(PROXY_SUBJECT, 'client', () => send(meta, body, deadlineMs)) : send(meta, body, deadlineMs);
}

/** One call through the proxy service, as the gateway's `/proxy` route and functions' `ctx.proxy` make it. */
export interface ProxyCall {
  /** What to call, with the caller's headers as given: the proxy service decides which reach the provider. */
  meta: Omit<ProxyRequestMeta, 'body'>;
  /** The request body: bytes, or the chunks of a body of unknown length (an HTTP request). */
  body: Uint8Array | AsyncIterable<Uint8Array>;
  /** The time one attempt may take upstream (PROXY_TIMEOUT_MS); the call's deadline counts its retries. */
  timeoutMs: number;
}

/** The provider's answer, as the proxy passed it on. */
export interface ProxyResponse {
  status: number;
  headers: Array<[string, string]>;
  /** The whole body when it rode inside the answer; undefined when it streams (see `chunks`). */
  inline: Uint8Array | undefined;
  /** The body chunk by chunk; stopping early (`return()`) lets the replica drop the upstream response. */
  chunks(): AsyncGenerator<Uint8Array>;
  /** The whole body, refusing one larger than `maxBytes` (`payload_too_large`). */
  read(maxBytes: number): Promise<Buffer>;
}

/**
 * Calls a provider through a proxy replica, which injects the connection's credentials and
 * applies the one header policy. Bodies either way ride inside the messages up to the bus's
 * inline limit and stream in chunks beyond, so any size passes with bounded memory. An error
 * answer is thrown as its AppError, so its code (and HTTP status) survives the hop.
 */
export async function callProxy(bus: Bus, call: ProxyCall): Promise<ProxyResponse> {
  const { timeoutMs } = call;
  const limit = bus.inlineLimit;
  const body = call.body instanceof Uint8Array ? bytesAhead(call.body, limit) : await readAhead(call.body, limit);
  const requestStream = body.rest ? servePullStream(bus, body.rest, { idleTimeoutMs: timeoutMs }) : undefined;
  const deadlineMs = proxyDeadlineMs(timeoutMs, call.meta.retries);
  const meta: ProxyRequestMeta = { ...call.meta, body: requestStream ? { stream: requestStream.inbox } : 'inline', deadline_ms: deadlineMs };
  const answer = await proxyExchange(bus, meta, body.head, deadlineMs);
  const reply = answer.meta;
  if (!reply.ok) throw AppError.fromBody(reply.error);
  if (reply.body === 'inline') {
    const inline = answer.body;
    return {
      status: reply.status,
      headers: reply.headers,
      inline,
      chunks: async function* () {
        if (inline.length > 0) yield inline;
      },
      read: async (maxBytes) => {
        if (inline.length > maxBytes) throw new AppError('payload_too_large', `The body is larger than ${maxBytes} bytes`);
        return Buffer.from(inline);
      },
    };
  }
  const stream = reply.body.stream;
  return {
    status: reply.status,
    headers: reply.headers,
    inline: undefined,
    chunks: () => pullStream(bus, stream, timeoutMs),
    read: (maxBytes) => pullAll(bus, stream, timeoutMs, maxBytes),
  };
}

interface BodyAhead {
  /** The body when it fits inline; empty when it streams. */
  head: Uint8Array;
  /** The whole body, when it does not fit inline. */
  rest: AsyncIterable<Uint8Array> | null;
}

function bytesAhead(bytes: Uint8Array, limit: number): BodyAhead {
  if (bytes.length <= limit) return { head: bytes, rest: null };
  return {
    head: new Uint8Array(0),
    rest: (async function* () {
      yield bytes;
    })(),
  };
}

/** Reads the body up to `limit`; a larger one continues as an iterator over all of it. */
async function readAhead(source: AsyncIterable<Uint8Array>, limit: number): Promise<BodyAhead> {
  const iterator = source[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await iterator.next();
    if (done) return { head: Buffer.concat(chunks), rest: null };
    chunks.push(value);
    size += value.length;
    if (size > limit) {
      return {
        head: new Uint8Array(0),
        rest: (async function* () {
          yield* chunks;
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            yield next.value;
          }
        })(),
      };
    }
  }
}
