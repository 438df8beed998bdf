import { JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { connectionOf } from './bus-connection.js';
import { unavailable, type Bus } from './create-bus.js';
import { retryJetStreamSetup } from './jetstream-setup.js';
import { decodeJson, encodeJson } from './wire.js';

export interface KvEntryOf<T> {
  value: T;
  revision: number;
}

/**
 * A JSON view of a NATS KV bucket with the two primitives coordination needs: create-if-absent
 * and compare-and-set on revision. Both return null when another writer got there first. NATS
 * failures (deadline, disconnection) surface as `service_unavailable`.
 */
export interface JsonKv<T> {
  readonly kv: KV;
  get(key: string): Promise<KvEntryOf<T> | null>;
  create(key: string, value: T): Promise<number | null>;
  update(key: string, value: T, revision: number): Promise<number | null>;
  /**
   * Deletes the key; with `revision`, only if it still holds that revision (a lock is released
   * only by its owner, never after it expired and another took it). False: it had changed.
   */
  delete(key: string, revision?: number): Promise<boolean>;
}

/** JetStream's "subjects overlap with an existing stream" and "stream name already in use". */
const STREAM_SUBJECTS_OVERLAP = 10065;
const STREAM_NAME_IN_USE = 10058;

export async function openKv<T>(bus: Bus, bucket: { name: string; ttlMs: number }): Promise<JsonKv<T>> {
  // Replicas apply when the bucket is created; an existing bucket keeps its own. Waits while a
  // clustered JetStream settles (`retryJetStreamSetup`).
  const create = () => new Kvm(connectionOf(bus).js).create(bucket.name, { ttl: bucket.ttlMs, history: 1, replicas: bus.jetstreamReplicas, timeout: bus.requestTimeoutMs });
  const kv = await retryJetStreamSetup(bus, `kv ${bucket.name}`, () =>
    // Replicas opening a new bucket at once: the server may refuse all but the first creation
    // ("subjects overlap with an existing stream"); the bucket exists then, and opening it again works.
    create().catch((error: unknown) => {
      if (error instanceof JetStreamApiError && (error.code === STREAM_SUBJECTS_OVERLAP || error.code === STREAM_NAME_IN_USE)) return create();
      throw error;
    }),
  );
  return {
    kv,
    async get(key) {
      const entry = await kv.get(key).catch((error: unknown) => {
        throw unavailable(`kv ${bucket.name}`, error);
      });
      if (entry === null || entry.operation !== 'PUT' || entry.value.length === 0) return null;
      return { value: decodeJson(entry.value) as T, revision: entry.revision };
    },
    async create(key, value) {
      try {
        return await kv.create(key, encodeJson(value));
      } catch (error) {
        if (isConflict(error)) return null;
        throw unavailable(`kv ${bucket.name}`, error);
      }
    },
    async update(key, value, revision) {
      try {
        return await kv.update(key, encodeJson(value), revision);
      } catch (error) {
        if (isConflict(error)) return null;
        throw unavailable(`kv ${bucket.name}`, error);
      }
    },
    async delete(key, revision) {
      try {
        await kv.delete(key, revision === undefined ? undefined : { previousSeq: revision });
        return true;
      } catch (error) {
        if (revision !== undefined && isConflict(error)) return false;
        throw unavailable(`kv ${bucket.name}`, error);
      }
    },
  };
}

/** JetStream's "wrong last sequence" (10071): the key changed since we read it. */
function isConflict(error: unknown): boolean {
  return (error instanceof JetStreamApiError && error.code === 10071) || (error instanceof Error && /wrong last sequence|key exists/i.test(error.message));
}
