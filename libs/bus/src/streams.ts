import type { JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { STREAMS, STREAMS_OWNER } from '@latchkey/contracts';
import type { Bus } from './create-bus.js';
import { retryJetStreamSetup } from './jetstream-setup.js';

/**
 * Creates the streams of STREAMS (EVENTS, JOBS, OPERATIONS) if absent; every service calls this
 * at start, idempotently. The streams' owner (`STREAMS_OWNER`, the only identity NATS lets update
 * them) also brings an existing stream's config up to date (replicas, limits); the others leave
 * it as it is. Waits (`retryJetStreamSetup`) while a clustered JetStream settles.
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
    if (!(await exists(jsm, stream.name))) {
      try {
        await jsm.streams.add(config);
        continue;
      } catch (addError) {
        // Another service of the stack created it between our look and our add: NATS then
        // answers "already in use" or, in its window between the name check and the subject
        // check, "subjects overlap". Only a stream of that name, there now, makes it a race.
        if (!(await exists(jsm, stream.name))) throw addError;
      }
    }
    if (bus.service === STREAMS_OWNER) await jsm.streams.update(stream.name, config);
  }
}

async function exists(jsm: JetStreamManager, name: string): Promise<boolean> {
  try {
    await jsm.streams.info(name);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

function isNotFound(error: unknown): boolean {
  return error instanceof Error && /not found/i.test(error.message);
}
