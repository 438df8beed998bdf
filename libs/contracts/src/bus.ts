import { z } from 'zod';
import { defineEvent } from './define.js';
import { SERVICE_NAMES, type ServiceName } from './services.js';

/**
 * What the bus records of a message it gave up on: a payload that failed its schema, a final
 * error, or a retryable one past its consumer's delivery cap. The payload itself stays in its
 * stream (by `stream_seq`, while the stream keeps it): it may hold secrets, a record may not.
 */
export const givenUpMessage = z.object({
  /** The publisher's name for itself; the gateway stores the one its subject names. */
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

/**
 * A service's records of the messages its consumers gave up on, on its own subject
 * (`events.message.given_up.<service>`): NATS lets each identity publish only its own, and the
 * gateway takes a record's service from the subject, never from the payload.
 */
export function givenUpContractOf<S extends string>(service: S) {
  return defineEvent(`message.given_up.${service}`, givenUpMessage);
}

/** The six services' given-up records; the gateway keeps them for `GET /admin/given-up`. */
export const givenUpContracts = Object.fromEntries(SERVICE_NAMES.map((service) => [service, givenUpContractOf(service)])) as {
  [S in ServiceName]: ReturnType<typeof givenUpContractOf<S>>;
};

/** The gateway's durable consumer of one service's given-up records. */
export function givenUpDurableOf(service: ServiceName): string {
  return `gateway-given-up-${service}`;
}
