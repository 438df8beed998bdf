import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { currentRequestId, newRequestId, requestIdFrom, runWithContext } from '@latchkey/logger';
import { extractTraceContext, inSpan, injectTraceContext, SpanKind, tracingEnabled } from '@latchkey/tracing';
import { AppError, toErrorItems, type ErrorBody } from '@latchkey/errors';
import type { z } from 'zod';

export const REQUEST_ID_HEADER = 'x-request-id';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Whether a request's reply subject is one a service answers on: a requester's inbox
 * (`_INBOX.…`, as every identity's are). NATS lets a server publish to whatever subject a
 * request names as its reply (`allow_responses`), so a caller could name a stream's subject or
 * the JetStream API and have the server write there under its own name: no answer goes
 * anywhere but an inbox.
 */
export function isInboxSubject(subject: string | undefined): subject is string {
  return subject !== undefined && subject.startsWith('_INBOX.');
}

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export function decodeJson(data: Uint8Array): unknown {
  if (data.length === 0) return undefined;
  return JSON.parse(decoder.decode(data));
}

/**
 * `data` decoded, or `failure(subject)` thrown if it is not JSON: a coded error, rather than the
 * JSON error, whose message quotes the bytes (which may hold secrets) and reads as a defect. The
 * failure is named, not a closure, so a request's path allocates nothing for it.
 */
export function decodeJsonOr(data: Uint8Array, failure: (subject: string) => AppError, subject: string): unknown {
  try {
    return decodeJson(data);
  } catch {
    throw failure(subject);
  }
}

/** A reply that is not one: not JSON, not a reply's shape, or not its contract's answer. */
export const malformedReply = (subject: string) => new AppError('internal_error', `malformed reply from ${subject}`);

/** A request whose bytes are not JSON (the subject is for the log only). */
export const requestNotJson = (subject: string) => new AppError('invalid_body', 'The request is not JSON', { cause: `request to ${subject}` });

/**
 * `data` decoded and checked against `schema`, never throwing: bytes that are not JSON fail as a
 * payload that breaks its schema does. Its callers run where an exception would do harm (a
 * NATS callback, a consumer before it settles its message), and a JSON error's message quotes
 * the bytes, which may hold secrets.
 */
export function safeParseJson<S extends z.ZodType>(schema: S, data: Uint8Array): { success: true; data: z.infer<S> } | { success: false } {
  let value: unknown;
  try {
    value = decodeJson(data);
  } catch {
    return { success: false };
  }
  return schema.safeParse(value);
}

/**
 * Headers for an outgoing message: the current request id travels with every hop, and so does
 * the active trace context (`traceparent`, `tracestate`) while tracing is on.
 */
export function outgoingHeaders(): MsgHdrs {
  const headers = natsHeaders();
  headers.set(REQUEST_ID_HEADER, currentRequestId() ?? newRequestId());
  if (tracingEnabled()) injectTraceContext((key, value) => headers.set(key, value));
  return headers;
}

export function requestIdOf(headers: MsgHdrs | undefined): string {
  return requestIdFrom(headers?.get(REQUEST_ID_HEADER));
}

/**
 * Runs `work` as the handling of a received message: under the request id it carried, and,
 * while tracing is on, in a span (`kind`: server for a request, consumer for a stored message)
 * continuing the trace context it carried. NATS has no maintained OpenTelemetry instrumentation
 * for Node, so the bus is it.
 */
export function inMessageContext<T>(headers: MsgHdrs | undefined, subject: string, kind: 'server' | 'consumer', work: () => Promise<T>): Promise<T> {
  // Tracing off: nothing below is built, the work runs as it did before tracing existed.
  if (!tracingEnabled()) return runWithContext({ requestId: requestIdOf(headers) }, work);
  return runWithContext({ requestId: requestIdOf(headers) }, () =>
    inSpan(
      `${kind === 'server' ? 'serve' : 'process'} ${subject}`,
      {
        kind: kind === 'server' ? SpanKind.SERVER : SpanKind.CONSUMER,
        attributes: { 'messaging.system': 'nats', 'messaging.destination.name': subject, 'messaging.operation.type': kind === 'server' ? 'receive' : 'process' },
        parent: extractTraceContext((key) => headers?.get(key) || undefined),
      },
      work,
    ),
  );
}

/** Runs `send` in a client (request) or producer (stored message) span while tracing is on. */
export function inSendSpan<T>(subject: string, kind: 'client' | 'producer', send: () => Promise<T>): Promise<T> {
  if (!tracingEnabled()) return send();
  return inSpan(
    `${kind === 'client' ? 'request' : 'publish'} ${subject}`,
    { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.PRODUCER, attributes: { 'messaging.system': 'nats', 'messaging.destination.name': subject, 'messaging.operation.type': 'send' } },
    send,
  );
}

/** The reply envelope: errors keep their code across the hop, so the HTTP status survives. */
export type Reply<T> = { ok: true; data: T } | { ok: false; error: ErrorBody };

/**
 * What travels instead of a reply too large for one NATS message: the inbox of a pull stream
 * serving the whole encoded `Reply`, and its size.
 */
export interface StreamedReply {
  stream: string;
  bytes: number;
}

export function isStreamedReply(value: unknown): value is StreamedReply {
  return typeof value === 'object' && value !== null && !('ok' in value) && typeof (value as StreamedReply).stream === 'string' && typeof (value as StreamedReply).bytes === 'number';
}

/** Parses `value` with `schema`, or throws `invalid_body` listing each problem. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  // `what` names internals (subjects): it goes to the log, the caller sees a plain message.
  throw new AppError('invalid_body', 'The request is invalid', { errors: toErrorItems(result.error.issues), cause: what });
}

/**
 * The inbox prefix the connection was opened with (`createBus` sets the identity's own). nats.js
 * keeps its options on the connection object without declaring them on the interface.
 */
export function inboxPrefixOfConnection(nc: NatsConnection): string {
  return (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix ?? '_INBOX';
}
