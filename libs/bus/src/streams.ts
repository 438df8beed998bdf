import { nanos } from '@nats-io/transport-node';
import { STREAMS } from '@latchkey/contracts';
import type { Bus } from './create-bus.js';
import { retryJetStreamSetup } from './jetstream-setup.js';

/**
 * Creates the streams of STREAMS (EVENTS, JOBS, OPERATIONS) if absent; every service calls this
 * at start, idempotently. Waits (`retryJetStreamSetup`) while a clustered JetStream settles.
 */
export async function ensureStreams(bus: Bus): Promise<void> {
  await retryJetStreamSetup(bus, 'streams', () => ensureStreamsOnce(bus));
}

async function ensureStreamsOnce(bus: Bus): Promise<void> {
  const jsm = await bus.jetstreamManager();
  for (const stream of Object.values(STREAMS)) {
    const config = {
      name: stream.name,
      subjects: [...stream.subjects],
      max_age: nanos(stream.maxAgeMs),
      ...('maxBytes' in stream ? { max_bytes: stream.maxBytes } : {}),
      num_replicas: bus.jetstreamReplicas,
    };
    try {
      await jsm.streams.info(stream.name);
      await jsm.streams.update(stream.name, config);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      try {
        await jsm.streams.add(config);
      } catch (addError) {
        // Another replica created it between our look and our add.
        if (!String(addError).includes('already in use')) throw addError;
      }
    }
  }
}

function isNotFound(error: unknown): boolean {
  return error instanceof Error && /not found/i.test(error.message);
}
