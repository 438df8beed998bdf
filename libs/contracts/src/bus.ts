import { z } from 'zod';
import { defineEvent } from './define.js';

/**
 * What the bus records of a message it gave up on: a payload that failed its schema, a final
 * error, or a retryable one past its consumer's delivery cap. The payload itself stays in its
 * stream (by `stream_seq`, while the stream keeps it): it may hold secrets, a record may not.
 */
export const givenUpMessage = z.object({
  service: z.string(),
  stream: z.string(),
  durable: z.string(),
  subject: z.string(),
  stream_seq: z.number().int(),
  deliveries: z.number().int(),
  reason: z.enum(['malformed', 'final_error', 'delivery_cap']),
  error: z.object({ code: z.string(), message: z.string() }),
  at: z.string(),
});
export type GivenUpMessage = z.infer<typeof givenUpMessage>;

export const busContracts = {
  /** A JetStream message was terminated; the gateway keeps these for `GET /admin/given-up`. */
  messageGivenUp: defineEvent('message.given_up', givenUpMessage),
} as const;
