import { JetStreamApiError } from '@nats-io/jetstream';
import { withRetries } from '@latchkey/errors';
import { connectionOf } from './bus-connection.js';
import type { Bus } from './create-bus.js';

/** The longest pause between two tries. */
const MAX_DELAY_MS = 5_000;
const FIRST_DELAY_MS = 250;

/**
 * JetStream API answers of a cluster that is still forming or electing (a node just joined, a
 * node just died): "JetStream system temporarily unavailable" (503, 10008), no responder or no
 * answer in time on `$JS.API`, or not enough current peers yet to place a replicated stream.
 * A setting NATS refuses for good (3 replicas on a single server) is none of these.
 */
export function isJetStreamSettling(error: unknown): boolean {
  // No JetStream answers on this node yet (the client names that "jetstream is not enabled").
  if (error instanceof Error && error.name === 'JetStreamNotEnabled') return true;
  if (error instanceof JetStreamApiError) return error.status === 503 || error.code === 10008 || error.code === 10023 || error.code === 10005;
  return error instanceof Error && /temporarily unavailable|no responders|timeout|no suitable peers|insufficient resources/i.test(error.message);
}

function codeOf(error: unknown): string {
  if (error instanceof JetStreamApiError) return `${error.status}/${error.code}`;
  return error instanceof Error ? error.name : 'unknown';
}

/**
 * Runs a JetStream setup step (creating streams, opening KV buckets at start) and, while
 * JetStream is settling, tries again with back-off (up to 5 s apart), logging each retry, for at
 * most the bus's `jetstreamSetupTimeoutMs` in all; other errors, and the last one past that
 * bound, are thrown. With no bound (the default), the first error is thrown.
 */
export async function retryJetStreamSetup<T>(bus: Bus, what: string, attempt: () => Promise<T>): Promise<T> {
  const { setup } = connectionOf(bus);
  return withRetries(attempt, {
    forMs: setup.timeoutMs,
    firstDelayMs: FIRST_DELAY_MS,
    maxDelayMs: MAX_DELAY_MS,
    retryIf: isJetStreamSettling,
    onRetry: (error, tries, delayMs) =>
      setup.logger.warn('jetstream not available yet; retrying', { what, code: codeOf(error), error: (error as Error).message, tries, retry_in_ms: delayMs }),
  });
}
