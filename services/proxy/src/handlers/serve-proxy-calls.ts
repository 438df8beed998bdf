import { isInboxSubject, type Bus } from '@latchkey/bus';
import { PROXY_KEEPALIVE_MS, PROXY_SUBJECT, safeParseProxyRequestMeta, type ProxyReplyMeta, type ProxyRequestMeta } from '@latchkey/contracts';
import { AppError, toErrorItems } from '@latchkey/errors';
import { requestIdFrom, runWithContext } from '@latchkey/logger';
import { busMetrics, counter } from '@latchkey/metrics';
import { extractTraceContext, inSpan, SpanKind, tracingEnabled } from '@latchkey/tracing';
import { ANSWER, KEEPALIVE, answerFrame, frameBatcher, readFrames } from '@latchkey/proxy-hop';

/** One call as a replica gets it; `respond` may be called once, and ends its keepalives. */
export interface IncomingProxyCall {
  meta: ProxyRequestMeta;
  body: Uint8Array;
  respond(meta: ProxyReplyMeta, body: Uint8Array): void;
}

export interface ProxyCallLimits {
  /** Calls held at once (`PROXY_MAX_IN_FLIGHT`), each until its answer's last byte has gone. */
  maxInFlight: number;
}

export interface ProxyCallServer {
  /**
   * Stops taking calls and waits for the ones taken, `deadlineMs` at most, then sends their
   * answers. Calls not answered by then are answered `upstream_timeout` (their request may have
   * reached the provider), and `cutOff` ends what they still hold (their upstream connections),
   * so that their handlers, and answers still streaming, end too.
   */
  drain(deadlineMs: number, cutOff: () => Promise<void> | void): Promise<void>;
}

/** After `cutOff`, how long the handlers it ended are given to finish (log their operation). */
const CUT_OFF_WAIT_MS = 1_000;

const shed = counter('latchkey_proxy_calls_shed_total');

/**
 * The replica's side of the proxy hop (frames in @latchkey/proxy-hop): takes calls in queue
 * group `proxy`, hands each to `handle`, and sends answers, and every `PROXY_KEEPALIVE_MS` a
 * keepalive for each call not yet answered, grouped per caller and per turn. A call whose meta
 * does not parse is answered `invalid_body` here, and one that finds `maxInFlight` calls held
 * `service_unavailable`, at once: it never starts. Each call is handled in the async context of
 * its caller's request id, as `bus.serve` does.
 */
export function serveProxyCalls(bus: Bus, handle: (call: IncomingProxyCall) => Promise<void>, limits: ProxyCallLimits): ProxyCallServer {
  // An answer that cannot be sent (the connection is gone) leaves its caller to the silence
  // limit: a 503 within seconds, as when a replica dies.
  const outgoing = frameBatcher(bus, () => undefined);
  const unanswered = new Map<number, { reply: string; id: number; respond: IncomingProxyCall['respond'] }>();
  const inFlight = new Set<Promise<void>>();
  let next = 0;
  const answer = (reply: string, id: number, meta: ProxyReplyMeta, body: Uint8Array) =>
    outgoing.queue(reply, undefined, answerFrame(id, ANSWER, JSON.stringify(meta), body));
  // The hop's frames bypass the bus's serve: timed here, as `messaging_process_duration_seconds`
  // of `proxy.request`, until the answer's head leaves (a streamed body goes on after it).
  const processed = busMetrics().served;

  const subscription = bus.subscribeRaw(
    PROXY_SUBJECT,
    (message) => {
      const reply = message.reply;
      // Answers go to a caller's inbox only (`isInboxSubject`).
      if (!isInboxSubject(reply)) return;
      for (const frame of readFrames(message.data, false)) {
        const parsed = safeMeta(frame.meta);
        if (!parsed.ok) {
          answer(reply, frame.id, { ok: false, error: parsed.error.toBody() }, new Uint8Array(0));
          continue;
        }
        // Held means answered or not: a streamed answer holds its upstream response until its end.
        if (inFlight.size >= limits.maxInFlight) {
          shed.inc({ reason: 'in_flight_limit' });
          processed(PROXY_SUBJECT, 0, 'service_unavailable');
          answer(reply, frame.id, { ok: false, error: overloaded(limits.maxInFlight) }, new Uint8Array(0));
          continue;
        }
        const key = next++;
        const start = performance.now();
        const call: IncomingProxyCall = {
          meta: parsed.meta,
          body: frame.body,
          respond: (meta, body) => {
            if (!unanswered.delete(key)) return;
            processed(PROXY_SUBJECT, (performance.now() - start) / 1000, meta.ok ? undefined : meta.error.code);
            answer(reply, frame.id, meta, body);
          },
        };
        unanswered.set(key, { reply, id: frame.id, respond: call.respond });
        const requestId = requestIdFrom(parsed.meta.request_id);
        const handled = runWithContext({ requestId }, tracingEnabled() ? () => inCallerTrace(parsed.meta, () => handle(call)) : () => handle(call));
        // Not `finally`: that makes three promises where this makes one.
        const settled = () => inFlight.delete(handled);
        inFlight.add(handled);
        void handled.then(settled, settled);
      }
    },
    { queue: 'proxy' },
  );
  setInterval(() => {
    for (const { reply, id } of unanswered.values()) outgoing.queue(reply, undefined, answerFrame(id, KEEPALIVE, '', new Uint8Array(0)));
  }, PROXY_KEEPALIVE_MS).unref();

  return {
    drain: async (deadlineMs, cutOff) => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), deadlineMs)));
      // The calls taken include those the subscription hands over while it drains.
      const finished = subscription.drain().then(() => Promise.allSettled([...inFlight]));
      try {
        if ((await Promise.race([finished, deadline])) === 'deadline') {
          const stopped = stoppedError().toBody();
          for (const { respond } of [...unanswered.values()]) {
            shed.inc({ reason: 'shutdown_deadline' });
            respond({ ok: false, error: stopped }, new Uint8Array(0));
          }
          outgoing.flush();
          await cutOff();
          await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, CUT_OFF_WAIT_MS))]);
        }
      } finally {
        clearTimeout(timer);
      }
      outgoing.flush();
    },
  };
}

/** A call that found the replica full: it was never started, so a retry (on any replica) is safe. */
const overloaded = (maxInFlight: number) =>
  new AppError('service_unavailable', `This proxy replica holds ${maxInFlight} calls, its limit (PROXY_MAX_IN_FLIGHT); the call was not sent, retry it`).toBody();

/** A call a stopping replica could wait for no longer: the provider may have its request, and act on it. */
const stoppedError = () =>
  new AppError('upstream_timeout', 'The proxy replica handling the call had to stop before the provider answered; the request may have reached the provider');

/** A server span continuing the trace context the caller put in the call's meta (tracing on only). */
function inCallerTrace(meta: ProxyRequestMeta, work: () => Promise<void>): Promise<void> {
  const { traceparent, tracestate } = meta;
  return inSpan(
    `serve ${PROXY_SUBJECT}`,
    {
      kind: SpanKind.SERVER,
      attributes: { 'messaging.system': 'nats', 'messaging.destination.name': PROXY_SUBJECT, 'messaging.operation.type': 'receive' },
      parent: extractTraceContext((key) => (key === 'traceparent' ? traceparent : key === 'tracestate' ? tracestate : undefined)),
    },
    work,
  );
}

function safeMeta(text: string): { ok: true; meta: ProxyRequestMeta } | { ok: false; error: AppError } {
  try {
    const result = safeParseProxyRequestMeta(JSON.parse(text));
    if (result.success) return { ok: true, meta: result.data };
    return { ok: false, error: new AppError('invalid_body', 'The proxy call is invalid', { errors: toErrorItems(result.error.issues) }) };
  } catch {
    return { ok: false, error: new AppError('invalid_body', 'The proxy call is not JSON') };
  }
}
