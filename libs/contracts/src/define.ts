import type { z } from 'zod';

/** A query or command answered over NATS request/reply by one service's queue group. */
export interface RequestContract<Req extends z.ZodType = z.ZodType, Res extends z.ZodType = z.ZodType> {
  readonly kind: 'request';
  readonly subject: string;
  readonly request: Req;
  readonly response: Res;
  /**
   * Callers send to `<subject>.<their NATS identity>` and only that identity may publish there,
   * so the server learns who asks from the subject NATS authorised, never from the payload
   * (`callerOf` in the bus). For requests whose answers must be attributed (credential reads).
   */
  readonly perCaller?: true;
}

/** A fact, published on the EVENTS JetStream stream; past tense (`connection.created`). */
export interface EventContract<P extends z.ZodType = z.ZodType> {
  readonly kind: 'event';
  /** The event's name; on the wire it travels as `events.<name>`. */
  readonly name: string;
  readonly subject: string;
  readonly payload: P;
}

/**
 * A message to every live replica of a service (core NATS, no queue group, not persisted):
 * for cache invalidation, where a missed message only costs a bounded staleness.
 */
export interface BroadcastContract<P extends z.ZodType = z.ZodType> {
  readonly kind: 'broadcast';
  readonly subject: string;
  readonly payload: P;
}

/** Work that must survive a crash, on the JOBS JetStream stream (`jobs.<name>`). */
export interface JobContract<P extends z.ZodType = z.ZodType> {
  readonly kind: 'job';
  readonly name: string;
  readonly subject: string;
  readonly payload: P;
  /** The stream that keeps it, when not JOBS (the operations log has its own limits). */
  readonly stream?: string;
}

export type AnyContract = RequestContract | EventContract | BroadcastContract | JobContract;

export function defineRequest<Req extends z.ZodType, Res extends z.ZodType>(
  subject: string,
  request: Req,
  response: Res,
  options: { perCaller?: true } = {},
): RequestContract<Req, Res> {
  return { kind: 'request', subject, request, response, ...options };
}

export function defineEvent<P extends z.ZodType>(name: string, payload: P): EventContract<P> {
  return { kind: 'event', name, subject: `events.${name}`, payload };
}

export function defineBroadcast<P extends z.ZodType>(subject: string, payload: P): BroadcastContract<P> {
  return { kind: 'broadcast', subject, payload };
}

export function defineJob<P extends z.ZodType>(name: string, payload: P): JobContract<P> {
  return { kind: 'job', name, subject: `jobs.${name}`, payload };
}

export type RequestOf<C extends RequestContract> = z.infer<C['request']>;
export type ResponseOf<C extends RequestContract> = z.infer<C['response']>;
export type PayloadOf<C extends EventContract | BroadcastContract | JobContract> = z.infer<C['payload']>;
