import { DiscardPolicy, JetStreamApiError, type JetStreamManager, type StreamConfig, type StreamInfo } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Logger } from '@latchkey/logger';
import { STREAMS, STREAMS_OWNER } from '@latchkey/contracts';
import { connectionOf } from './bus-connection.js';
import type { Bus } from './create-bus.js';
import { retryJetStreamSetup } from './jetstream-setup.js';

/** What the services are told of the streams' limits (the rest are STREAMS' own). */
export interface StreamLimits {
  /** The JOBS stream's bound in bytes (`JOBS_STREAM_MAX_BYTES`); `STREAMS.jobs.maxBytes` when absent. */
  jobsMaxBytes?: number;
}

type StreamSpec = (typeof STREAMS)[keyof typeof STREAMS];

/**
 * Creates the streams of STREAMS (EVENTS, JOBS, OPERATIONS) if absent; every service calls this
 * at start, idempotently. The streams' owner (`STREAMS_OWNER`, the only identity NATS lets update
 * them) also brings an existing stream's config up to date (replicas, limits); the others leave
 * it as it is. Waits (`retryJetStreamSetup`) while a clustered JetStream settles.
 */
export async function ensureStreams(bus: Bus, limits: StreamLimits = {}): Promise<void> {
  await retryJetStreamSetup(bus, 'streams', () => ensureStreamsOnce(bus, limits));
}

async function ensureStreamsOnce(bus: Bus, limits: StreamLimits): Promise<void> {
  const jsm = await bus.jetstreamManager();
  for (const stream of Object.values(STREAMS)) {
    const maxBytes = stream.name === STREAMS.jobs.name ? (limits.jobsMaxBytes ?? STREAMS.jobs.maxBytes) : 'maxBytes' in stream ? stream.maxBytes : undefined;
    const config = {
      name: stream.name,
      subjects: [...stream.subjects],
      max_age: nanos(stream.maxAgeMs),
      ...(maxBytes === undefined ? {} : { max_bytes: maxBytes }),
      ...('discard' in stream && stream.discard === 'new' ? { discard: DiscardPolicy.New } : {}),
      num_replicas: bus.jetstreamReplicas,
    };
    try {
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
      if (bus.service !== STREAMS_OWNER) continue;
      const current = await jsm.streams.info(stream.name);
      await jsm.streams.update(stream.name, boundHeldBack(stream, config, current, connectionOf(bus).setup.logger));
    } catch (error) {
      throw reservationRefused(stream, maxBytes, error);
    }
  }
}

/**
 * The update of an existing stream, with its byte bound left as it is while the stream holds
 * more than nine tenths of the new one: NATS 2.9 applies a lower bound by deleting the oldest
 * messages at once, whatever the discard policy, and those may be jobs not done yet (2.12 keeps
 * them). The tenth left over is for what is published between our look and the update. A later
 * start of the owner applies it, once messages have aged out.
 */
function boundHeldBack(stream: StreamSpec, config: Partial<StreamConfig>, current: StreamInfo, logger: Logger): Partial<StreamConfig> {
  const bound = config.max_bytes;
  if (bound === undefined || bound === current.config.max_bytes || current.state.bytes <= bound * 0.9) return config;
  logger.warn('the stream holds more than its bound; its bound is applied at a later start, once it holds less', {
    stream: stream.name,
    bytes: current.state.bytes,
    bound,
    bound_now: current.config.max_bytes,
  });
  return { ...config, max_bytes: current.config.max_bytes, discard: current.config.discard };
}

/**
 * NATS reserves a stream's byte bound in its JetStream store (`max_file_store`, 75 % of the
 * disk's free space when unset) as it takes the stream, and refuses one that does not fit: the
 * start then fails, saying which bound and where it comes from.
 */
function reservationRefused(stream: StreamSpec, maxBytes: number | undefined, error: unknown): unknown {
  const refused = (error instanceof JetStreamApiError && error.code === 10047) || (error instanceof Error && /insufficient storage resources/i.test(error.message));
  if (!refused || maxBytes === undefined) return error;
  const setting = stream.name === STREAMS.jobs.name ? ' (JOBS_STREAM_MAX_BYTES)' : '';
  return new Error(
    `NATS cannot reserve the ${stream.name} stream's bound, ${maxBytes} bytes, in its JetStream store (${(error as Error).message}): give NATS a larger max_file_store, or the stream a lower bound${setting}`,
    { cause: error },
  );
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
