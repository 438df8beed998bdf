import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { currentRequestId, newRequestId, requestIdFrom } from '@latchkey/logger';
import { AppError, toErrorItems, type ErrorBody } from '@latchkey/errors';
import type { z } from 'zod';

export const REQUEST_ID_HEADER = 'x-request-id';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export function decodeJson(data: Uint8Array): unknown {
  if (data.length === 0) return undefined;
  return JSON.parse(decoder.decode(data));
}

/** Headers for an outgoing message: the current request id travels with every hop. */
export function outgoingHeaders(): MsgHdrs {
  const headers = natsHeaders();
  headers.set(REQUEST_ID_HEADER, currentRequestId() ?? newRequestId());
  return headers;
}

export function requestIdOf(headers: MsgHdrs | undefined): string {
  return requestIdFrom(headers?.get(REQUEST_ID_HEADER));
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
